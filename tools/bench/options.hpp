#pragma once
// comm-bench command-line options (nccl-tests' short flags plus our long ones).

#include "stats.hpp"

#include <comm/types.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace comm::bench {

// -a: how each iteration's time is combined across ranks (nccl-tests' -a numbers).
enum class RankTime { rank0 = 0, mean = 1, min = 2, max = 3 };

struct Options {
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t{64} << 20;
  double step_factor = 4;
  std::size_t step_bytes = 0;  // -i: linear step in bytes; 0 = multiply by step_factor
  int iters = 50;
  int warmup = 5;
  int agg = 1;                 // -m: operations per timed iteration (time divided by agg)
  int rounds = 1;              // --rounds: turns each algorithm's iterations are split into
  int check = 1;               // -c N: checked runs per point (0: no check)
  RankTime rank_time = RankTime::max;
  int inplace = -1;            // --inplace 0|1; -1: with nccl-tests output (single --algo), not with --algo all
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  BenchColl coll = BenchColl::allreduce;  // the first of colls (what a Runner runs)
  std::vector<BenchColl> colls{BenchColl::allreduce};  // --coll a,b: each in turn, per transport
  std::string transport;      // "" = the configured one (COMM_TRANSPORT), "all" = every available
  std::string algo = "auto";  // a name, "auto", "all", or names separated by commas
  std::string json_path;
  std::string plot_path;
  bool quiet = false;
  // nccl-tests' layout (out-of-place and in-place column groups, their
  // footers) for a single --algo; the side-by-side table for --algo all.
  bool nccl_format() const { return !side_by_side(); }
  // --algo all or a list: several algorithms (and auto) side by side, then the summaries.
  bool side_by_side() const { return algo == "all" || algo.find(',') != std::string::npos; }
  bool measure_inplace() const { return inplace < 0 ? nccl_format() : inplace == 1; }
  bool help = false;
};

// Parses argv[1..]. Throws comm::Error(invalid_argument) with a message naming
// the flag, the bad value and what is expected.
Options parse_options(const std::vector<std::string_view>& args);

// The --help text.
std::string usage();

}  // namespace comm::bench
