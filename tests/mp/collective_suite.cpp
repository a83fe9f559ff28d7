// comm-mp-suite: every collective x every algorithm the communicator offers x
// counts x dtypes x ops, in place and out of place, in real processes (run it under commrun). Each rank
// checks its own results against values it computes independently.
//
//   comm-mp-suite [--quick] [--algo NAME] [--coll NAME]
//   comm-mp-suite --kill-rank R --kill-after K [--linger]
//
// Fault mode: rank R SIGKILLs itself inside its K-th allreduce; every other
// rank must get an error naming rank R within 10 s, destroy its communicator
// and exit 0. By default a survivor leaves as soon as it has its error, as an
// application would, so a survivor that was not waiting on R may learn of it
// from the others leaving (the transport then names R as the first failure).
// --linger makes survivors keep their communicators until every survivor has
// its error (at most 10 s): each must then learn of R's death by itself.
//
// Exit status: 0 all passed, 1 a failure, 77 the transport is not available.

#include "suite_values.hpp"

#include "mp_test_util.hpp"

#include <comm/comm.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <regex>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using comm::Collective;
using comm::DataType;
using comm::ReduceOp;
using suite::Buffer;

struct Options {
  bool quick = false;
  std::string algo;  // "" = every algorithm
  std::string coll;  // "" = every collective
  int kill_rank = -1;
  int kill_after = 0;
  bool linger = false;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: comm-mp-suite [--quick] [--algo NAME] [--coll NAME]\n"
               "       comm-mp-suite --kill-rank R --kill-after K [--linger]\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) usage();
      return std::string(argv[++i]);
    };
    if (a == "--quick") o.quick = true;
    else if (a == "--algo") o.algo = value();
    else if (a == "--coll") o.coll = value();
    else if (a == "--kill-rank") o.kill_rank = std::atoi(value().c_str());
    else if (a == "--kill-after") o.kill_after = std::atoi(value().c_str());
    else if (a == "--linger") o.linger = true;
    else usage();
  }
  if (!o.coll.empty()) {
    try {
      o.coll = std::string(comm::to_string(comm::parse_collective(o.coll)));
    } catch (const comm::Error& e) {
      std::fprintf(stderr, "comm-mp-suite: --coll: %s\n", e.what());
      usage();
    }
  }
  return o;
}

class Suite {
 public:
  Suite(comm::Communicator& c, const Options& o) : c_(c), o_(o), n_(c.size()), r_(c.rank()) {}

  int run() {
    try {
      run_collectives();
      if (wanted("send") && o_.algo.empty()) run_send_recv();
      if (o_.coll.empty() && o_.algo.empty()) {
        run_nonblocking();
        run_split();
      }
      // Rank 0 hosts the store: nobody leaves while another rank may still
      // be creating a sub-communicator through it.
      check("final barrier", [&] {
        c_.barrier();
        return std::string();
      });
    } catch (const Stop&) {
      std::printf("comm-mp-suite: rank %d: the communicator failed; stopping. %d passed, %d failed\n", r_, passed_,
                  failed_);
      return 1;
    }
    std::printf("comm-mp-suite: rank %d: %d passed, %d failed (%d unsupported combinations skipped)\n", r_, passed_,
                failed_, unsupported_);
    if (passed_ + failed_ == 0) {
      std::printf("FAIL: nothing ran: --algo '%s' / --coll '%s' match no algorithm of this communicator\n",
                  o_.algo.c_str(), o_.coll.c_str());
      return 1;
    }
    return failed_ == 0 ? 0 : 1;
  }

 private:
  struct Stop {};  // unwinds to run() once the communicator has failed

  bool wanted(std::string_view coll) const { return o_.coll.empty() || o_.coll == coll; }

  // 300: a one-shot in line flags with a partial last line (shm, 4-byte types:
  // 1200 B in 22 lines of 56 B); 1003 of 1- and 2-byte types too.
  std::vector<std::size_t> counts() const {
    std::vector<std::size_t> v = {0, 1, 7, static_cast<std::size_t>(n_) + 1, 300, 1003};
    if (!o_.quick) v.push_back(256 * 1024);
    return v;
  }

  // Runs one check. A usage error `unsupported` is a skip (consistent on every
  // rank: it is thrown before anything moves); a runtime error fails the
  // communicator, so the suite stops there.
  void check(const std::string& name, const std::function<std::string()>& body) {
    std::string problem;
    try {
      problem = body();
    } catch (const comm::Error& e) {
      if (e.code() == comm::ErrorCode::unsupported) {
        ++unsupported_;
        return;
      }
      problem = std::string("threw ") + std::string(comm::to_string(e.code())) + ": " + e.what();
      if (!e.is_usage()) {
        report(name, problem);
        throw Stop{};
      }
    }
    if (problem.empty()) ++passed_;
    else report(name, problem);
  }

  void report(const std::string& name, const std::string& problem) {
    ++failed_;
    if (failed_ <= 40) std::printf("FAIL %s: %s\n", name.c_str(), problem.c_str());
  }

  static std::string mismatch(std::size_t i, double got, double want) {
    return "element " + std::to_string(i) + " is " + std::to_string(got) + ", expected " + std::to_string(want);
  }

  comm::CallOptions call(const std::string& algo) const {
    comm::CallOptions opts;
    opts.algorithm = algo;
    return opts;
  }

  std::string label(Collective coll, const std::string& algo, DataType t, ReduceOp op, std::size_t count,
                    const char* extra = "") const {
    return std::string(comm::to_string(coll)) + "/" + (algo.empty() ? "auto" : algo) + " " +
           std::string(comm::to_string(t)) + " " + std::string(comm::to_string(op)) + " n=" + std::to_string(count) +
           extra;
  }

  // ---- reducing collectives

  std::string allreduce(const std::string& algo, DataType t, ReduceOp op, std::size_t count, bool in_place) {
    Buffer in(t, count), out(t, count);
    for (std::size_t i = 0; i < count; ++i) in.set(i, suite::input_value(r_, i, t, op));
    comm::View vin{in.data(), count, t}, vout{out.data(), count, t};
    if (in_place) c_.allreduce(vin, op, call(algo));
    else c_.allreduce(vin, vout, op, call(algo));
    const Buffer& res = in_place ? in : out;
    for (std::size_t i = 0; i < count; ++i) {
      const double want = suite::expected_reduction(n_, i, t, op);
      if (!suite::close_enough(t, res.get(i), want)) return mismatch(i, res.get(i), want);
    }
    return "";
  }

  // In place: the output is this rank's block of the input.
  std::string reduce_scatter(const std::string& algo, DataType t, ReduceOp op, std::size_t count, bool in_place) {
    const std::size_t total = count * static_cast<std::size_t>(n_), mine = static_cast<std::size_t>(r_) * count;
    Buffer in(t, total), out(t, count);
    for (std::size_t i = 0; i < total; ++i) in.set(i, suite::input_value(r_, i, t, op));
    c_.reduce_scatter(comm::ConstView{in.data(), total, t}, comm::View{in_place ? in.at(mine) : out.data(), count, t},
                      op, call(algo));
    for (std::size_t i = 0; i < count; ++i) {
      const double want = suite::expected_reduction(n_, mine + i, t, op);
      const double got = in_place ? in.get(mine + i) : out.get(i);
      if (!suite::close_enough(t, got, want)) return mismatch(i, got, want);
    }
    return "";
  }

  std::string reduce(const std::string& algo, DataType t, ReduceOp op, std::size_t count, int root, bool in_place) {
    Buffer in(t, count), out(t, count);
    for (std::size_t i = 0; i < count; ++i) in.set(i, suite::input_value(r_, i, t, op));
    Buffer& res = in_place ? in : out;
    c_.reduce(comm::ConstView{in.data(), count, t}, comm::View{res.data(), count, t}, op, root, call(algo));
    for (std::size_t i = 0; i < count; ++i) {
      // Off the root an in-place buffer is only an input: it must be intact.
      const double want = r_ == root ? suite::expected_reduction(n_, i, t, op) : suite::input_value(r_, i, t, op);
      if (r_ != root && !in_place) break;
      if (!suite::close_enough(t, res.get(i), want)) return mismatch(i, res.get(i), want);
    }
    return "";
  }

  // ---- data movement (values are exact in every dtype: compare exactly)

  static double value(int rank, std::size_t i, DataType t) { return suite::input_value(rank, i, t, ReduceOp::sum); }

  // In place: the input is this rank's block of the output.
  std::string allgather(const std::string& algo, DataType t, std::size_t count, bool in_place) {
    Buffer in(t, count), out(t, count * static_cast<std::size_t>(n_));
    const std::size_t mine = static_cast<std::size_t>(r_) * count;
    for (std::size_t i = 0; i < count; ++i) (in_place ? out : in).set(in_place ? mine + i : i, value(r_, i, t));
    c_.allgather(comm::ConstView{in_place ? out.at(mine) : in.data(), count, t},
                 comm::View{out.data(), out.count(), t}, call(algo));
    for (int q = 0; q < n_; ++q)
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t at = static_cast<std::size_t>(q) * count + i;
        if (out.get(at) != value(q, i, t)) return mismatch(at, out.get(at), value(q, i, t));
      }
    return "";
  }

  std::string broadcast(const std::string& algo, DataType t, std::size_t count, int root) {
    Buffer buf(t, count);
    for (std::size_t i = 0; i < count; ++i) buf.set(i, r_ == root ? value(root, i, t) : 99);
    c_.broadcast(comm::View{buf.data(), count, t}, root, call(algo));
    for (std::size_t i = 0; i < count; ++i)
      if (buf.get(i) != value(root, i, t)) return mismatch(i, buf.get(i), value(root, i, t));
    return "";
  }

  std::string all_to_all(const std::string& algo, DataType t, std::size_t block, bool in_place) {
    const std::size_t total = block * static_cast<std::size_t>(n_);
    Buffer in(t, total), other(t, total);
    Buffer& out = in_place ? in : other;
    for (std::size_t i = 0; i < total; ++i) in.set(i, value(r_, i, t));
    c_.all_to_all(comm::ConstView{in.data(), total, t}, comm::View{out.data(), total, t}, call(algo));
    // Block q of my output is block r_ of rank q's input.
    for (int q = 0; q < n_; ++q)
      for (std::size_t i = 0; i < block; ++i) {
        const std::size_t at = static_cast<std::size_t>(q) * block + i;
        const double want = value(q, static_cast<std::size_t>(r_) * block + i, t);
        if (out.get(at) != want) return mismatch(at, out.get(at), want);
      }
    return "";
  }

  // Rank s sends sc(s, d) elements to rank d; element i of that message is value(s, d*100000 + i).
  static std::size_t sc(int s, int d, std::size_t base) {
    return (static_cast<std::size_t>(s) * 3 + static_cast<std::size_t>(d) * 5 + base) % 7 + base;
  }

  // In place: one buffer holds both layouts (as long as the longer of the two).
  std::string all_to_allv(const std::string& algo, DataType t, std::size_t base, bool in_place) {
    std::vector<std::size_t> scount(static_cast<std::size_t>(n_)), sdispl(scount.size()), rcount(scount.size()),
        rdispl(scount.size());
    std::size_t stotal = 0, rtotal = 0;
    for (int q = 0; q < n_; ++q) {
      const auto uq = static_cast<std::size_t>(q);
      scount[uq] = sc(r_, q, base);
      sdispl[uq] = stotal;
      stotal += scount[uq];
      rcount[uq] = sc(q, r_, base);
      rdispl[uq] = rtotal;
      rtotal += rcount[uq];
    }
    if (in_place) stotal = rtotal = std::max(stotal, rtotal);
    Buffer in(t, stotal), other(t, rtotal);
    Buffer& out = in_place ? in : other;
    for (int d = 0; d < n_; ++d)
      for (std::size_t i = 0; i < scount[static_cast<std::size_t>(d)]; ++i)
        in.set(sdispl[static_cast<std::size_t>(d)] + i, value(r_, static_cast<std::size_t>(d) * 100000 + i, t));
    c_.all_to_allv(comm::ConstView{in.data(), stotal, t}, scount, sdispl, comm::View{out.data(), rtotal, t}, rcount,
                   rdispl, call(algo));
    for (int s = 0; s < n_; ++s)
      for (std::size_t i = 0; i < rcount[static_cast<std::size_t>(s)]; ++i) {
        const std::size_t at = rdispl[static_cast<std::size_t>(s)] + i;
        const double want = value(s, static_cast<std::size_t>(r_) * 100000 + i, t);
        if (out.get(at) != want) return mismatch(at, out.get(at), want);
      }
    return "";
  }

  void run_reducing(Collective coll, const std::string& algo) {
    auto one = [&](DataType t, ReduceOp op, std::size_t count) {
      if (coll == Collective::allreduce) {
        check(label(coll, algo, t, op, count, " out-of-place"), [&] { return allreduce(algo, t, op, count, false); });
        check(label(coll, algo, t, op, count, " in-place"), [&] { return allreduce(algo, t, op, count, true); });
      } else if (coll == Collective::reduce_scatter) {
        check(label(coll, algo, t, op, count), [&] { return reduce_scatter(algo, t, op, count, false); });
      } else {
        for (int root : {0, n_ - 1})
          check(label(coll, algo, t, op, count, root ? " root=last" : " root=0"),
                [&] { return reduce(algo, t, op, count, root, false); });
      }
    };
    for (std::size_t count : counts()) one(DataType::f32, ReduceOp::sum, count);
    for (std::size_t count : counts()) {  // in place (allreduce runs it in every case above)
      const DataType t = DataType::i32;
      if (coll == Collective::reduce_scatter)
        check(label(coll, algo, t, ReduceOp::sum, count, " in-place"),
              [&] { return reduce_scatter(algo, t, ReduceOp::sum, count, true); });
      if (coll == Collective::reduce)
        for (int root : {0, n_ - 1})
          check(label(coll, algo, t, ReduceOp::max, count, root ? " in-place root=last" : " in-place root=0"),
                [&] { return reduce(algo, t, ReduceOp::max, count, root, true); });
    }
    const std::vector<std::size_t> op_counts = o_.quick ? std::vector<std::size_t>{7} : std::vector<std::size_t>{7, 1003};
    for (ReduceOp op : comm::kAllReduceOps)
      for (DataType t : {DataType::f32, DataType::i32, DataType::bf16})
        for (std::size_t count : op_counts)
          if (!(t == DataType::f32 && op == ReduceOp::sum)) one(t, op, count);
    for (DataType t : comm::kAllDataTypes)
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg}) one(t, op, static_cast<std::size_t>(n_) + 1);
  }

  void run_moving(Collective coll, const std::string& algo) {
    auto one = [&](DataType t, std::size_t count, bool in_place) {
      const char* how = in_place ? " in-place" : "";
      if (coll == Collective::allgather) {
        check(label(coll, algo, t, ReduceOp::sum, count, how), [&] { return allgather(algo, t, count, in_place); });
      } else if (coll == Collective::broadcast) {  // always in place
        for (int root : {0, n_ - 1})
          if (!in_place)
            check(label(coll, algo, t, ReduceOp::sum, count, root ? " root=last" : " root=0"),
                  [&] { return broadcast(algo, t, count, root); });
      } else if (coll == Collective::all_to_all) {
        check(label(coll, algo, t, ReduceOp::sum, count, in_place ? " per peer in-place" : " per peer"),
              [&] { return all_to_all(algo, t, count, in_place); });
      } else {
        check(label(coll, algo, t, ReduceOp::sum, count, in_place ? " base in-place" : " base"),
              [&] { return all_to_allv(algo, t, count, in_place); });
      }
    };
    for (std::size_t count : counts())
      for (bool in_place : {false, true}) one(DataType::f32, count, in_place);
    for (DataType t : comm::kAllDataTypes) one(t, static_cast<std::size_t>(n_) + 1, false);
  }

  void run_collectives() {
    for (Collective coll : comm::kAllCollectives) {
      if (coll == Collective::send || coll == Collective::recv || !wanted(comm::to_string(coll))) continue;
      std::vector<std::string> algos = c_.algorithms(coll);
      algos.insert(algos.begin(), "");  // automatic selection
      for (const std::string& algo : algos) {
        if (!o_.algo.empty() && algo != o_.algo) continue;
        switch (coll) {
          case Collective::allreduce:
          case Collective::reduce_scatter:
          case Collective::reduce: run_reducing(coll, algo); break;
          case Collective::allgather:
          case Collective::broadcast:
          case Collective::all_to_all:
          case Collective::all_to_allv: run_moving(coll, algo); break;
          case Collective::barrier:
            check("barrier/" + (algo.empty() ? std::string("auto") : algo), [&] {
              c_.barrier(call(algo));
              return std::string();
            });
            break;
          case Collective::send:
          case Collective::recv: break;
        }
      }
    }
  }

  // ---- point to point, non-blocking, split

  void run_send_recv() {
    const int next = (r_ + 1) % n_, prev = (r_ + n_ - 1) % n_;
    for (std::size_t count : counts()) {
      check("send/recv ring i32 n=" + std::to_string(count), [&] {
        Buffer out(DataType::i32, count), in(DataType::i32, count);
        for (std::size_t i = 0; i < count; ++i) out.set(i, value(r_, i, DataType::i32));
        comm::Work rw = c_.irecv(comm::View{in.data(), count, DataType::i32}, prev);
        comm::Work sw = c_.isend(comm::ConstView{out.data(), count, DataType::i32}, next);
        sw.wait();
        rw.wait();
        for (std::size_t i = 0; i < count; ++i)
          if (in.get(i) != value(prev, i, DataType::i32)) return mismatch(i, in.get(i), value(prev, i, DataType::i32));
        return std::string();
      });
    }
    if (n_ > 1) {
      check("send/recv blocking, two tags received in reverse order", [&] {
        std::int32_t a = 100 + r_, b = 200 + r_, ga = 0, gb = 0;
        comm::CallOptions t1, t2;
        t1.tag = 1;
        t2.tag = 2;
        comm::Work w2 = c_.irecv(comm::View{&gb, 1, DataType::i32}, prev, t2);
        comm::Work w1 = c_.irecv(comm::View{&ga, 1, DataType::i32}, prev, t1);
        c_.send(comm::ConstView{&a, 1, DataType::i32}, next, t1);
        c_.send(comm::ConstView{&b, 1, DataType::i32}, next, t2);
        w1.wait();
        w2.wait();
        if (ga != 100 + prev || gb != 200 + prev)
          return "got " + std::to_string(ga) + "/" + std::to_string(gb) + ", expected " + std::to_string(100 + prev) +
                 "/" + std::to_string(200 + prev);
        return std::string();
      });
    }
  }

  void run_nonblocking() {
    check("non-blocking: 3 iallreduce + ibroadcast + iallgather + ibarrier in flight", [&] {
      const std::vector<std::size_t> sizes = {7, static_cast<std::size_t>(n_) + 1, 1003};
      std::vector<Buffer> ins, outs;
      std::vector<comm::Work> works;
      for (std::size_t s : sizes) {
        ins.emplace_back(DataType::f32, s);
        outs.emplace_back(DataType::f32, s);
      }
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        for (std::size_t i = 0; i < sizes[k]; ++i) ins[k].set(i, suite::input_value(r_, i, DataType::f32, ReduceOp::sum));
        works.push_back(c_.iallreduce(comm::ConstView{ins[k].data(), sizes[k], DataType::f32},
                                      comm::View{outs[k].data(), sizes[k], DataType::f32}, ReduceOp::sum));
      }
      Buffer bc(DataType::i32, 33), ag_in(DataType::i32, 5), ag_out(DataType::i32, 5 * static_cast<std::size_t>(n_));
      for (std::size_t i = 0; i < 33; ++i) bc.set(i, r_ == 0 ? value(0, i, DataType::i32) : -1);
      for (std::size_t i = 0; i < 5; ++i) ag_in.set(i, value(r_, i, DataType::i32));
      works.push_back(c_.ibroadcast(comm::View{bc.data(), 33, DataType::i32}, 0));
      works.push_back(c_.iallgather(comm::ConstView{ag_in.data(), 5, DataType::i32},
                                    comm::View{ag_out.data(), ag_out.count(), DataType::i32}));
      works.push_back(c_.ibarrier());
      // Drive progress through test() first, then wait for whatever is left.
      const auto deadline = Clock::now() + std::chrono::seconds(60);
      bool all = false;
      while (!all && Clock::now() < deadline) {
        all = true;
        for (comm::Work& w : works) all = w.test() && all;
      }
      for (comm::Work& w : works) w.wait();
      for (std::size_t k = 0; k < sizes.size(); ++k)
        for (std::size_t i = 0; i < sizes[k]; ++i) {
          const double want = suite::expected_reduction(n_, i, DataType::f32, ReduceOp::sum);
          if (outs[k].get(i) != want) return "iallreduce #" + std::to_string(k) + ": " + mismatch(i, outs[k].get(i), want);
        }
      for (std::size_t i = 0; i < 33; ++i)
        if (bc.get(i) != value(0, i, DataType::i32)) return "ibroadcast: " + mismatch(i, bc.get(i), value(0, i, DataType::i32));
      for (int q = 0; q < n_; ++q)
        for (std::size_t i = 0; i < 5; ++i) {
          const std::size_t at = static_cast<std::size_t>(q) * 5 + i;
          if (ag_out.get(at) != value(q, i, DataType::i32))
            return "iallgather: " + mismatch(at, ag_out.get(at), value(q, i, DataType::i32));
        }
      return std::string();
    });
  }

  void run_split() {
    check("split even/odd (keys reverse the order), then allreduce on the sub-communicator", [&] {
      const int color = r_ % 2;
      comm::Communicator sub = c_.split(color, -r_);
      if (!sub.valid()) return std::string("split returned an invalid communicator");
      std::vector<int> members;
      for (int q = n_ - 1; q >= 0; --q)
        if (q % 2 == color) members.push_back(q);
      const int want_rank = static_cast<int>(std::find(members.begin(), members.end(), r_) - members.begin());
      if (sub.size() != static_cast<int>(members.size()) || sub.rank() != want_rank)
        return "sub-communicator is rank " + std::to_string(sub.rank()) + " of " + std::to_string(sub.size()) +
               ", expected " + std::to_string(want_rank) + " of " + std::to_string(members.size());
      std::int64_t mine = r_ + 1, sum = 0;
      sub.allreduce(comm::ConstView{&mine, 1, DataType::i64}, comm::View{&sum, 1, DataType::i64}, ReduceOp::sum);
      std::int64_t want = 0;
      for (int q : members) want += q + 1;
      if (sum != want) return "sum of (old rank + 1) is " + std::to_string(sum) + ", expected " + std::to_string(want);
      return std::string();
    });
  }

  comm::Communicator& c_;
  Options o_;
  int n_, r_;
  int passed_ = 0, failed_ = 0, unsupported_ = 0;
};

// --linger: survivors meet in a file store (the TCP store may have died with
// rank R) and keep their communicators until every survivor has seen its
// error, or for at most the 10 s any of them may take; one that only learns of
// R's death because the others left then fails its own check (too slow).
void wait_for_survivors(const comm::Communicator& c, int kill_rank, const std::string& job_id) {
  try {
    auto store = comm::make_file_store((std::filesystem::temp_directory_path() / ("comm-mp-suite-" + job_id)).string());
    store->set("saw/" + std::to_string(c.rank()), "1");
    std::vector<std::string> keys;
    for (int q = 0; q < c.size(); ++q)
      if (q != kill_rank) keys.push_back("saw/" + std::to_string(q));
    store->wait(keys, std::chrono::seconds(10));
  } catch (const comm::Error& e) {
    std::printf("rank %d: leaving although not every survivor has seen the error: %s\n", c.rank(), e.what());
  }
}

// Rank `kill_rank` dies by SIGKILL inside its kill_after-th allreduce; every
// other rank must get an error naming it within 10 s, then shut down cleanly.
int fault_mode(comm::Communicator c, const Options& o, const std::string& job_id) {
  const int r = c.rank();
  if (o.kill_rank < 0 || o.kill_rank >= c.size() || c.size() < 2) {
    std::printf("FAIL: --kill-rank %d needs a communicator of at least 2 ranks containing it (size %d)\n",
                o.kill_rank, c.size());
    return 1;
  }
  // Call -1 is a barrier: everyone has joined before anyone dies (a death
  // during creation is a store failure, rank 0 hosts the store, not what this
  // mode tests). Calls 0.. are allreduces; rank R dies inside call K.
  std::vector<float> in(4096, 1.0f), out(4096);
  const int max_iters = o.kill_after + 1000;
  for (int it = -1; it < max_iters; ++it) {
    if (r == o.kill_rank && it == o.kill_after) {
      comm::Work w = c.iallreduce(comm::view(in), comm::view(out), ReduceOp::sum);
      w.test();
      std::printf("rank %d: killing myself (SIGKILL) inside allreduce #%d\n", r, it);
      std::fflush(stdout);
      ::kill(::getpid(), SIGKILL);
    }
    const auto t0 = Clock::now();
    try {
      if (it < 0)
        c.barrier();
      else
        c.allreduce(comm::view(in), comm::view(out), ReduceOp::sum);
    } catch (const comm::Error& e) {
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      const std::string msg = e.what();
      std::printf("rank %d: %s #%d failed after %.3f s with %s: %s\n", r, it < 0 ? "barrier" : "allreduce", it, secs,
                  std::string(comm::to_string(e.code())).c_str(), msg.c_str());
      const bool names = std::regex_search(msg, std::regex("rank " + std::to_string(o.kill_rank) + "([^0-9]|$)"));
      if (o.linger) wait_for_survivors(c, o.kill_rank, job_id);
      const auto t1 = Clock::now();
      { comm::Communicator gone = std::move(c); }
      std::printf("rank %d: communicator destroyed in %.3f s\n", r,
                  std::chrono::duration<double>(Clock::now() - t1).count());
      if (!names) std::printf("FAIL: the error does not name rank %d\n", o.kill_rank);
      if (secs > 10.0) std::printf("FAIL: the error took %.3f s (limit 10 s)\n", secs);
      // A death fails the whole communicator, so a rank still finishing the
      // call before the victim's (the victim finished it, having every rank's
      // input; this rank's last receives may still be pending) fails in that
      // one. Nobody is further behind: the victim's previous call needed
      // every rank to have entered it.
      const int first_may_fail = o.kill_after - 1;
      if (it < first_may_fail)
        std::printf("FAIL: call #%d failed, although every rank had finished it before rank %d died\n", it,
                    o.kill_rank);
      return names && secs <= 10.0 && it >= first_may_fail ? 0 : 1;
    }
  }
  std::printf("FAIL: rank %d: %d allreduces completed without an error although rank %d was killed\n", r, max_iters,
              o.kill_rank);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered so that nothing is lost when a rank is killed mid-run.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const Options o = parse(argc, argv);
  comm::Config cfg = comm::Config::from_env();
  comm::Communicator c = mptest::create_or_exit(cfg);
  if (c.rank() == 0)
    std::printf("comm-mp-suite: %d ranks over '%s'%s\n", c.size(), std::string(c.transport_name()).c_str(),
                o.quick ? " (quick)" : "");
  if (o.kill_rank >= 0) {
    // One id per job: the store token commrun generates, else the store address.
    std::string job_id = cfg.store_token.empty() ? cfg.store : cfg.store_token;
    for (char& ch : job_id)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return fault_mode(std::move(c), o, job_id);
  }
  return Suite(c, o).run();
}
