#pragma once
// Runs one transport's sweep: for every size, every requested algorithm
// (side by side, interleaved per size), timed between barriers, checked
// against the local reference, with the cost model's prediction alongside.

#include "options.hpp"
#include "stats.hpp"

#include <comm/communicator.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace comm::bench {

// One measured point: (coll, transport, algo, size).
struct Result {
  BenchColl coll = BenchColl::allreduce;
  std::string transport;
  std::string algo;       // the name asked for: "auto", "ring", ...; sendrecv: "p2p"
  std::string ran;        // the algorithm that ran (auto resolved); sendrecv: "p2p"
  std::string auto_pick;  // what automatic selection picks at this size; "" = not applicable
  int ranks = 1;
  Layout layout;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = -1;          // -1 for collectives without a root
  int iters = 0;
  double time_us = 0;     // median over iterations of the slowest rank's time
  double p10_us = 0, p90_us = 0;
  double algbw_gbps = 0, busbw_gbps = 0;
  std::int64_t wrong = -1;  // -1: not checked
  double pred_us = -1;      // negative: no prediction
  // The same point called in place (--inplace; nccl-tests' second column group).
  struct InPlace {
    bool measured = false;
    double time_us = 0, algbw_gbps = 0, busbw_gbps = 0;
    std::int64_t wrong = -1;
  } inplace;
  // Byte counters (Communicator::bytes_sent) per operation, the largest of any
  // rank: all it sent, and what it sent to ranks on other hosts.
  double sent_bytes = 0, cross_host_bytes = 0;
};

// A point that could not run (the algorithm is not eligible there, ...).
struct Skip {
  std::string transport;
  std::string algo;
  std::size_t bytes = 0;
  std::string reason;
};

struct Callbacks {
  std::function<void(const Result&)> on_result;  // every rank, in order
  std::function<void(const Skip&)> on_skip;
  std::function<void(std::size_t done, std::size_t total, std::size_t bytes)> on_size;  // before each size
};

class Runner {
 public:
  Runner(Communicator& comm, const Options& options);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // The algorithm names to run for options.algo ("all": every algorithm of the
  // collective, then "auto"). Throws invalid_argument for an unknown name.
  std::vector<std::string> algorithms() const;

  // Runs the sweep. Usage errors of one algorithm at one size become Skips;
  // runtime errors (the communicator failed) propagate.
  void run(const Callbacks& cb);

 private:
  struct Timing {
    int iters = 0;
    double time_us = 0, p10_us = 0, p90_us = 0;
    std::vector<std::uint64_t> sent;  // bytes to each peer during the timed operations
  };
  // This rank's raw times of one point, gathered over its turns.
  struct Turns {
    std::vector<double> times;        // microseconds per timed iteration, this rank's
    std::vector<std::uint64_t> sent;  // bytes to each peer during them
  };
  void run_op(const Layout& l, const CallOptions& o, bool inplace);
  void prepare(const Layout& l, bool inplace, bool poison);
  // One turn: `warm` untimed iterations, then `iters` timed ones between barriers, appended to `t`.
  void time_turn(const Layout& l, const CallOptions& o, bool inplace, int warm, int iters, Turns& t);
  // Combines the turns' times across ranks as -a says; median, p10, p90.
  Timing summarize(Turns t);
  Timing time_runs(const Layout& l, const CallOptions& o, bool inplace);
  std::int64_t check_runs(const Layout& l, const CallOptions& o, bool inplace);
  // A point's result before its out-of-place timing (what it is, its prediction, its options).
  Result describe(const Layout& l, const std::string& algo, const std::vector<CandidateCost>& cands,
                  CallOptions& o) const;
  // The rest of a point once its out-of-place times are in: figures, checks, in place.
  void complete(const Layout& l, const CallOptions& o, const Timing& t, Result& r);
  Result measure(const Layout& l, const std::string& algo, const std::vector<CandidateCost>& cands);
  // Every algorithm of `algos` at one layout, their timed iterations in
  // opts_.rounds turns, one turn of each per round.
  void measure_in_rounds(const Layout& l, const std::vector<std::string>& algos,
                         const std::vector<CandidateCost>& cands, const Callbacks& cb);
  void traffic(const Timing& t, Result& r);

  Communicator& comm_;
  Options opts_;
  std::size_t elem_;
  std::byte* in_ = nullptr;
  std::byte* out_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace comm::bench
