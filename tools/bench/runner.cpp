#include "runner.hpp"

#include "data.hpp"

#include "util/carryover_order.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>

namespace comm::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::align_val_t kAlign{4096};
constexpr int kStartupWarmup = 200;

std::byte* allocate(std::size_t bytes) {
  auto* p = static_cast<std::byte*>(::operator new(std::max<std::size_t>(bytes, 1), kAlign));
  // Touch every page now, so page faults never land inside a timed iteration.
  std::memset(p, 0, bytes);
  return p;
}

}  // namespace

Runner::Runner(Communicator& comm, const Options& options)
    : comm_(comm), opts_(options), elem_(dtype_size(options.dtype)) {
  if (opts_.coll == BenchColl::sendrecv && comm_.size() < 2)
    throw Error(ErrorCode::invalid_argument, "--coll sendrecv is a ping-pong between ranks 0 and 1: run it with "
                                             "commrun -n 2 (this job has 1 rank)");
  if (has_root(opts_.coll) && opts_.root >= comm_.size())
    throw Error(ErrorCode::invalid_argument, "-r " + std::to_string(opts_.root) + " is not a rank of this " +
                                                 std::to_string(comm_.size()) + "-rank job");
  // Every layout of the sweep fits in max_bytes (sizes round down).
  capacity_ = opts_.max_bytes;
  in_ = allocate(capacity_);
  out_ = allocate(capacity_);
}

Runner::~Runner() {
  ::operator delete(in_, kAlign);
  ::operator delete(out_, kAlign);
}

std::vector<std::string> Runner::algorithms() const {
  // sendrecv has no algorithms: "auto" and "all" (e.g. beside --coll allreduce) both mean the p2p path.
  if (opts_.coll == BenchColl::sendrecv) {
    if (opts_.algo != "auto" && opts_.algo != "all")
      throw Error(ErrorCode::invalid_argument, "--coll sendrecv runs the transport's point-to-point path; --algo '" +
                                                   opts_.algo + "' does not apply (leave --algo at auto)");
    return {"p2p"};
  }
  const std::vector<std::string> known = comm_.algorithms(to_collective(opts_.coll));
  if (opts_.algo == "auto") return {"auto"};
  if (opts_.algo == "all") {
    std::vector<std::string> all = known;
    all.push_back("auto");
    return all;
  }
  // One name, or several separated by commas: those side by side, plus auto.
  std::vector<std::string> names;
  for (std::size_t at = 0;;) {
    const std::size_t comma = opts_.algo.find(',', at);
    const std::string name = opts_.algo.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (name != "auto" && std::find(known.begin(), known.end(), name) == known.end()) {
      std::string valid;
      for (const auto& k : known) valid += (valid.empty() ? "" : ", ") + k;
      throw Error(ErrorCode::unknown_algorithm,
                  "--algo '" + opts_.algo + "': " + std::string(to_string(opts_.coll)) + " on transport '" +
                      std::string(comm_.transport_name()) + "' has no algorithm '" + name + "' (valid: " + valid +
                      ", auto, all, or several of them separated by commas)");
    }
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (opts_.side_by_side() && std::find(names.begin(), names.end(), "auto") == names.end()) names.push_back("auto");
  return names;
}

// In place, as nccl-tests calls it: the output buffer doubles as the input
// (reduce_scatter: this rank's block of the input; allgather: this rank's
// block of the output). Broadcast is in place either way.
void Runner::run_op(const Layout& l, const CallOptions& o, bool inplace) {
  const DataType t = opts_.dtype;
  const std::size_t mine = static_cast<std::size_t>(comm_.rank()) * l.block * elem_;
  std::byte* const in = inplace ? out_ : in_;
  switch (opts_.coll) {
    case BenchColl::allreduce:
      comm_.allreduce(ConstView{in, l.count, t}, View{out_, l.count, t}, opts_.op, o);
      break;
    case BenchColl::reduce_scatter:
      comm_.reduce_scatter(ConstView{in, l.count, t}, View{inplace ? out_ + mine : out_, l.block, t}, opts_.op, o);
      break;
    case BenchColl::allgather:
      comm_.allgather(ConstView{inplace ? out_ + mine : in_, l.block, t}, View{out_, l.count, t}, o);
      break;
    case BenchColl::broadcast:
      comm_.broadcast(View{out_, l.count, t}, opts_.root, o);
      break;
    case BenchColl::reduce:
      comm_.reduce(ConstView{in, l.count, t}, View{out_, l.count, t}, opts_.op, opts_.root, o);
      break;
    case BenchColl::alltoall:
      comm_.all_to_all(ConstView{in, l.count, t}, View{out_, l.count, t}, o);
      break;
    case BenchColl::sendrecv:
      if (comm_.rank() == 0) {
        comm_.send(ConstView{in, l.count, t}, 1, o);
        comm_.recv(View{out_, l.count, t}, 1, o);
      } else if (comm_.rank() == 1) {
        comm_.recv(View{out_, l.count, t}, 0, o);
        comm_.send(ConstView{in, l.count, t}, 0, o);
      }
      break;
  }
}

// Input for one run: in_ (out of place) or where run_op(inplace) reads it;
// the output poisoned so forgotten elements count as wrong (broadcast's
// root keeps its data in the output, which is its input).
void Runner::prepare(const Layout& l, bool inplace, bool poison) {
  const BenchColl c = opts_.coll;
  const int rank = comm_.rank();
  const bool root_data = c == BenchColl::broadcast && rank == opts_.root;
  if (poison && !root_data) fill_poison(out_, opts_.dtype, l.out_count);
  if (root_data) fill_input(out_, opts_.dtype, l.count, c, opts_.op, rank);
  if (!inplace) {
    fill_input(in_, opts_.dtype, l.in_count, c, opts_.op, rank);
  } else if (c == BenchColl::allgather) {
    fill_input(out_ + static_cast<std::size_t>(rank) * l.block * elem_, opts_.dtype, l.block, c, opts_.op, rank);
  } else if (c != BenchColl::broadcast) {
    fill_input(out_, opts_.dtype, l.in_count, c, opts_.op, rank);
  }
}

void Runner::time_turn(const Layout& l, const CallOptions& o, bool inplace, int warm, int iters, Turns& t) {
  const auto warm_up = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) {
      comm_.barrier();
      run_op(l, o, inplace);
    }
  };
  const auto warm_began = Clock::now();
  warm_up(warm);
  // Topped up to a millisecond (warmup_top_up, as OSU's benchmarks warm up
  // 200 iterations below 8 KiB); every rank makes the most calls any rank asks for.
  std::int64_t more =
      warmup_top_up(warm, std::chrono::duration<double, std::micro>(Clock::now() - warm_began).count());
  if (warm > 0) comm_.allreduce(View{&more, 1, DataType::i64}, ReduceOp::max);
  warm_up(more);
  const bool pingpong = opts_.coll == BenchColl::sendrecv;
  const std::vector<std::uint64_t> before = comm_.bytes_sent();
  for (int i = 0; i < iters; ++i) {
    comm_.barrier();
    const auto t0 = Clock::now();
    for (int k = 0; k < opts_.agg; ++k) run_op(l, o, inplace);
    double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / opts_.agg;
    // Ping-pong: the initiator's round trip, halved; rank 1's clock started
    // at its own barrier exit and would add the barrier's skew.
    if (pingpong) us = comm_.rank() == 0 ? us / 2 : 0.0;
    t.times.push_back(us);
  }
  const std::vector<std::uint64_t> after = comm_.bytes_sent();
  t.sent.resize(after.size(), 0);
  for (std::size_t p = 0; p < after.size(); ++p) t.sent[p] += after[p] - before[p];
}

// Median, p10 and p90 over iterations; each iteration's time is combined
// across ranks as -a says (outside the timed region).
Runner::Timing Runner::summarize(Turns turns) {
  std::vector<double>& times = turns.times;
  const RankTime how = opts_.coll == BenchColl::sendrecv ? RankTime::max : opts_.rank_time;
  switch (how) {
    case RankTime::rank0: comm_.broadcast(view(times), 0); break;
    case RankTime::mean:
      comm_.allreduce(view(times), ReduceOp::sum);
      for (auto& us : times) us /= comm_.size();
      break;
    case RankTime::min: comm_.allreduce(view(times), ReduceOp::min); break;
    case RankTime::max: comm_.allreduce(view(times), ReduceOp::max); break;
  }
  Timing t;
  t.iters = static_cast<int>(times.size());
  t.sent = std::move(turns.sent);
  t.time_us = median(times);
  t.p10_us = percentile(times, 10);
  t.p90_us = percentile(times, 90);
  return t;
}

// One turn of every iteration, after the scaled warm-up, between barriers.
Runner::Timing Runner::time_runs(const Layout& l, const CallOptions& o, bool inplace) {
  Turns t;
  time_turn(l, o, inplace, scaled_warmup(opts_.warmup, l.bytes), scaled_iters(opts_.iters, l.bytes), t);
  return summarize(std::move(t));
}

// Wrong elements over opts_.check checked runs, summed over ranks (every rank gets the total).
std::int64_t Runner::check_runs(const Layout& l, const CallOptions& o, bool inplace) {
  CheckArgs a;
  a.coll = opts_.coll;
  a.dtype = opts_.dtype;
  a.op = opts_.op;
  a.rank = comm_.rank();
  a.nranks = comm_.size();
  a.root = opts_.root;
  a.block = l.block;
  const bool block_out = inplace && opts_.coll == BenchColl::reduce_scatter;
  const std::byte* out = block_out ? out_ + static_cast<std::size_t>(comm_.rank()) * l.block * elem_ : out_;
  std::int64_t wrong = 0;
  for (int k = 0; k < opts_.check; ++k) {
    prepare(l, inplace, true);
    comm_.barrier();
    run_op(l, o, inplace);
    wrong += static_cast<std::int64_t>(count_wrong(out, a));
  }
  comm_.allreduce(View{&wrong, 1, DataType::i64}, ReduceOp::sum);
  return wrong;
}

Result Runner::describe(const Layout& l, const std::string& algo, const std::vector<CandidateCost>& cands,
                        CallOptions& o) const {
  const BenchColl c = opts_.coll;
  Result r;
  r.coll = c;
  r.transport = std::string(comm_.transport_name());
  r.algo = algo;
  r.ranks = comm_.size();
  r.layout = l;
  r.dtype = opts_.dtype;
  r.op = opts_.op;
  r.root = has_root(c) ? opts_.root : -1;
  if (c == BenchColl::sendrecv) {
    r.ran = "p2p";
    // The cost model's message time on the 0-1 link: alpha + bytes / beta.
    const LinkInfo link = comm_.link(0, 1);
    r.pred_us = link.alpha_us + static_cast<double>(l.bytes) / (link.beta_gbps * 1e3);
  } else {
    r.auto_pick = comm_.algorithm_for(to_collective(c), l.bytes);
    r.ran = algo == "auto" ? r.auto_pick : algo;
    for (const auto& cand : cands)
      if (cand.algorithm == r.ran) r.pred_us = cand.predicted_us;
  }
  if (algo != "auto" && c != BenchColl::sendrecv) o.algorithm = algo;
  return r;
}

void Runner::complete(const Layout& l, const CallOptions& o, const Timing& t, Result& r) {
  const BenchColl c = opts_.coll;
  const double factor = busbw_factor(c, comm_.size());
  r.iters = t.iters;
  r.time_us = t.time_us;
  r.p10_us = t.p10_us;
  r.p90_us = t.p90_us;
  traffic(t, r);
  r.algbw_gbps = gbps(l.bytes, r.time_us);
  r.busbw_gbps = r.algbw_gbps * factor;
  if (opts_.check > 0) r.wrong = check_runs(l, o, false);

  // sendrecv has no in-place form (nccl-tests' is a copy to itself).
  if (opts_.measure_inplace() && c != BenchColl::sendrecv) {
    try {
      prepare(l, true, false);
      const Timing ip = time_runs(l, o, true);
      r.inplace.time_us = ip.time_us;
      r.inplace.algbw_gbps = gbps(l.bytes, ip.time_us);
      r.inplace.busbw_gbps = r.inplace.algbw_gbps * factor;
      if (opts_.check > 0) r.inplace.wrong = check_runs(l, o, true);
      r.inplace.measured = true;
    } catch (const Error& e) {
      // Refused alike on every rank before data moved (an algorithm without an in-place form).
      if (!e.is_usage() || comm_.failed()) throw;
    }
  }
}

Result Runner::measure(const Layout& l, const std::string& algo, const std::vector<CandidateCost>& cands) {
  CallOptions o;
  Result r = describe(l, algo, cands, o);
  prepare(l, false, false);
  complete(l, o, time_runs(l, o, false), r);
  return r;
}

void Runner::measure_in_rounds(const Layout& l, const std::vector<std::string>& algos,
                               const std::vector<CandidateCost>& cands, const Callbacks& cb) {
  struct Point {
    Result result;
    CallOptions options;
    Turns turns;
    bool skipped = false;
  };
  std::vector<Point> points(algos.size());
  for (std::size_t a = 0; a < algos.size(); ++a) points[a].result = describe(l, algos[a], cands, points[a].options);
  const int rounds = opts_.rounds;
  const int iters = scaled_iters(opts_.iters, l.bytes);
  const int warm = std::max(2, scaled_warmup(opts_.warmup, l.bytes) / rounds);
  prepare(l, false, false);
  for (int k = 0; k < rounds; ++k)
    for (std::size_t j = 0; j < algos.size(); ++j) {
      // In an order that changes every round, so that no algorithm always
      // follows the same one (util/carryover_order.hpp).
      const std::size_t a = util::carryover_order(algos.size(), static_cast<std::size_t>(k), j);
      Point& p = points[a];
      if (p.skipped) continue;
      // The iterations split as evenly as they go, the first rounds taking one more.
      const int turn = iters / rounds + (k < iters % rounds ? 1 : 0);
      try {
        time_turn(l, p.options, false, warm, turn, p.turns);
      } catch (const Error& e) {
        // Refused alike on every rank before any data moved (see run()).
        if (!e.is_usage() || comm_.failed()) throw;
        p.skipped = true;
        if (cb.on_skip) cb.on_skip({std::string(comm_.transport_name()), algos[a], l.bytes, e.what()});
      }
    }
  for (Point& p : points) {
    if (p.skipped) continue;
    const Timing t = summarize(std::move(p.turns));
    complete(l, p.options, t, p.result);
    if (cb.on_result) cb.on_result(p.result);
  }
}

// What one operation of the timed loop sent (barriers send no payload), the
// largest over ranks: in all, and across hosts.
// The bytes one operation sent (averaged over the timed runs), the largest of any rank.
void Runner::traffic(const Timing& t, Result& r) {
  std::vector<double> sent{0.0, 0.0};
  for (int p = 0; p < comm_.size(); ++p) {
    const auto d = static_cast<double>(t.sent[static_cast<std::size_t>(p)]);
    sent[0] += d;
    if (!comm_.peers().same_host(comm_.rank(), p)) sent[1] += d;
  }
  for (double& v : sent) v /= std::max(1, t.iters * opts_.agg);
  comm_.allreduce(view(sent), ReduceOp::max);
  r.sent_bytes = sent[0];
  r.cross_host_bytes = sent[1];
}

void Runner::run(const Callbacks& cb) {
  const std::vector<std::string> algos = algorithms();
  // A fresh communicator's first few hundred small operations can be far
  // slower than steady state (connection wire-up; ranks that both sleep
  // between messages settling into waking each other late), which would be
  // charged to whichever algorithm happens to run first.
  for (int i = 0; i < kStartupWarmup; ++i) {
    std::int64_t one = 1;
    comm_.allreduce(View{&one, 1, DataType::i64}, ReduceOp::sum);
    comm_.barrier();
  }
  const std::vector<std::size_t> sizes = opts_.step_bytes > 0
                                             ? size_sweep_linear(opts_.min_bytes, opts_.max_bytes, opts_.step_bytes)
                                             : size_sweep(opts_.min_bytes, opts_.max_bytes, opts_.step_factor);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const Layout l = make_layout(opts_.coll, sizes[i], elem_, comm_.size());
    if (cb.on_size) cb.on_size(i, sizes.size(), l.bytes);
    std::vector<CandidateCost> cands;
    if (opts_.coll != BenchColl::sendrecv) cands = comm_.candidates(to_collective(opts_.coll), l.bytes);
    if (opts_.rounds > 1) {
      measure_in_rounds(l, algos, cands, cb);
      continue;
    }
    for (const auto& algo : algos) {
      try {
        const Result r = measure(l, algo, cands);
        if (cb.on_result) cb.on_result(r);
      } catch (const Error& e) {
        // Usage errors are raised identically on every rank before any data
        // moves (e.g. an algorithm that needs a power-of-two group), so every
        // rank skips the same point and the job stays in step.
        if (!e.is_usage() || comm_.failed()) throw;
        if (cb.on_skip) cb.on_skip({std::string(comm_.transport_name()), algo, l.bytes, e.what()});
      }
    }
  }
}

}  // namespace comm::bench
