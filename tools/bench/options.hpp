#pragma once
// comm-bench command-line options (nccl-tests' short flags plus our long ones).

#include "stats.hpp"

#include <comm/types.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace comm::bench {

struct Options {
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t{64} << 20;
  double step_factor = 4;
  int iters = 50;
  int warmup = 5;
  bool check = true;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  BenchColl coll = BenchColl::allreduce;  // the first of colls (what a Runner runs)
  std::vector<BenchColl> colls{BenchColl::allreduce};  // --coll a,b: each in turn, per transport
  std::string transport;      // "" = the configured one (COMM_TRANSPORT), "all" = every available
  std::string algo = "auto";  // a name, "auto" or "all"
  std::string json_path;
  std::string plot_path;
  bool quiet = false;
  bool help = false;
};

// Parses argv[1..]. Throws comm::Error(invalid_argument) with a message naming
// the flag, the bad value and what is expected.
Options parse_options(const std::vector<std::string_view>& args);

// The --help text.
std::string usage();

}  // namespace comm::bench
