// Direct-memory programs, simulated: every rank's program of several
// consecutive calls (of different algorithms) runs in one process under
// random interleavings, on simulated windows and flags, with an interpreter
// written here independently of the engine's executor. Each call's results
// are checked against values computed here, and every pair of conflicting
// window accesses (a write and another rank's read or write of the same bytes
// of the same slot) must be ordered by happens-before through the flags
// (vector clocks), so no interleaving at all can race — not only the ones
// that happened to run.

#include "sweep_sizes.hpp"
#include "engine/direct/cpu_executor.hpp"
#include "engine/direct/direct_algorithm.hpp"
#include "select/direct_model.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace comm;
using namespace comm::direct;

constexpr unsigned kSlotsSim = 2;

struct Access {
  int rank;
  bool write;
  std::size_t lo, hi;
  std::vector<std::uint64_t> clock;
  std::uint64_t call;
};

// One call of the sequence: an algorithm with its sizes; i64 sums (exact).
struct CallSpec {
  const DirectAlgorithm* algo;
  std::size_t count;
  int root;
  bool in_place = false;  // all-reduce only: output == input
};

class Sim {
 public:
  Sim(int n, std::size_t window, std::uint64_t seed) : n_(n), window_(window), rng_(seed) {
    const auto nn = static_cast<std::size_t>(n);
    ins_.resize(nn);
    scratch_.assign(nn, std::vector<std::byte>(window, std::byte{0}));
    outs_.resize(nn);
    buf_access_.resize(nn * 2);
    in_place_.resize(nn);
    win_.assign(nn * kSlotsSim, std::vector<std::byte>(window, std::byte{0}));
    flags_.assign(nn * kSlotsSim, 0);
    signals_.resize(nn * kSlotsSim);
    access_.resize(nn * kSlotsSim);
    clock_.assign(nn, std::vector<std::uint64_t>(nn, 0));
    synced_.assign(nn, true);
  }

  // Runs `calls` in order on every rank; returns "" or the first problem.
  std::string run(const std::vector<CallSpec>& calls) {
    const auto nn = static_cast<std::size_t>(n_);
    struct RankState {
      std::size_t call = 0, pc = 0;
      bool guarded = false;
    };
    std::vector<RankState> st(nn);
    // Build every call's programs for all ranks up front (as each rank's engine would).
    std::vector<std::vector<DirectProgram>> progs(calls.size());
    for (std::size_t c = 0; c < calls.size(); ++c) {
      for (int r = 0; r < n_; ++r) {
        DirectArgs a{calls[c].algo->collective, r, n_, calls[c].count, 8, calls[c].root, window_, true};
        ProgramBuilder b(r, n_);
        calls[c].algo->build(a, b);
        progs[c].push_back(std::move(b).finish());
      }
      analyse(progs[c]);
    }
    for (int r = 0; r < n_; ++r) start_call(calls[0], r);
    std::size_t finished = 0;
    while (finished < nn) {
      std::vector<int> runnable;
      for (int r = 0; r < n_; ++r) {
        RankState& s = st[static_cast<std::size_t>(r)];
        if (s.call < calls.size() &&
            can_step(progs[s.call][static_cast<std::size_t>(r)], s.pc, r, s.call + 1, s.guarded))
          runnable.push_back(r);
      }
      if (runnable.empty()) return "deadlock";
      const int r = runnable[std::uniform_int_distribution<std::size_t>(0, runnable.size() - 1)(rng_)];
      RankState& s = st[static_cast<std::size_t>(r)];
      const std::uint64_t seq = s.call + 1;
      if (!s.guarded) {
        guard(r, seq);
        s.guarded = true;
        continue;
      }
      const DirectProgram& p = progs[s.call][static_cast<std::size_t>(r)];
      if (std::string e = step(p, p.ops[s.pc], r, seq); !e.empty()) return e;
      if (++s.pc == p.ops.size()) {
        if (std::string e = check(calls[s.call], r, out_of(r), seq); !e.empty()) return e;
        synced_[static_cast<std::size_t>(r)] = p.synced;
        s.pc = 0;
        s.guarded = false;
        if (++s.call == calls.size())
          ++finished;
        else
          start_call(calls[s.call], r);
      }
    }
    return {};
  }

 private:
  // Input of rank r in call `seq`: distinct per rank, element and call.
  static std::int64_t value(int r, std::size_t i, std::uint64_t seq) {
    return static_cast<std::int64_t>(seq * 1000003 + static_cast<std::uint64_t>(r) * 7919 + i * 13);
  }
  // The caller (re)fills its buffers, which stay the same from call to call:
  // a write of all of them, which must not race with a peer still reading them.
  void start_call(const CallSpec& c, int r) {
    const std::size_t n = static_cast<std::size_t>(n_);
    const auto ru = static_cast<std::size_t>(r);
    const std::uint64_t seq = ++started_[ru];
    in_place_[ru].resize(seq + 1, false);
    in_place_[ru][seq] = c.in_place;
    std::vector<std::int64_t>& in = ins_[ru];
    std::vector<std::int64_t>& out = c.in_place ? ins_[ru] : outs_[ru];
    std::size_t in_count = c.count, out_count = c.count;
    const Collective k = c.algo->collective;
    if (k == Collective::reduce_scatter) in_count = c.count * n;
    if (k == Collective::allgather) out_count = c.count * n;
    if (k == Collective::all_to_all) in_count = out_count = c.count * n;
    if (!c.in_place) out.assign(out_count, -1);
    in.resize(in_count);
    for (std::size_t i = 0; i < in_count; ++i) in[i] = value(r, i, seq);
    ++clock_[ru][ru];
    for (int id = 0; id < 2; ++id)
      buf_access_[ru * 2 + static_cast<std::size_t>(id)].push_back(
          {r, true, 0, (id ? out.size() : in.size()) * 8, clock_[ru], seq});
  }
  std::vector<std::int64_t>& out_of(int r) {
    const auto ru = static_cast<std::size_t>(r);
    return in_place_[ru].back() ? ins_[ru] : outs_[ru];
  }

  std::string check(const CallSpec& c, int r, const std::vector<std::int64_t>& out, std::uint64_t seq) const {
    const std::size_t n = static_cast<std::size_t>(n_);
    auto sum = [&](std::size_t i) {
      std::int64_t s = 0;
      for (int p = 0; p < n_; ++p) s += value(p, i, seq);
      return s;
    };
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::int64_t want = 0;
      const Collective k = c.algo->collective;
      if (k == Collective::allreduce) want = sum(i);
      if (k == Collective::reduce) want = r == c.root ? sum(i) : -1;
      if (k == Collective::reduce_scatter) want = sum(static_cast<std::size_t>(r) * c.count + i);
      if (k == Collective::allgather) want = value(static_cast<int>(i / c.count), i % c.count, seq);
      if (k == Collective::broadcast) want = r == c.root ? -1 : value(c.root, i, seq);
      if (k == Collective::all_to_all)
        want = value(static_cast<int>(i / c.count), static_cast<std::size_t>(r) * c.count + i % c.count, seq);
      (void)n;
      if (out[i] != want)
        return "call " + std::to_string(seq) + " (" + std::string(c.algo->name) + ") rank " + std::to_string(r) +
               " element " + std::to_string(i) + ": " + std::to_string(out[i]) + ", want " + std::to_string(want);
    }
    return {};
  }

  std::size_t widx(int rank, std::uint64_t seq) const {
    return static_cast<std::size_t>(rank) * kSlotsSim + static_cast<std::size_t>(seq % kSlotsSim);
  }
  bool flag_ok(int rank, std::uint64_t seq, std::uint32_t step) const {
    return flags_[widx(rank, seq)] >= direct_flag(seq, step);
  }
  bool can_step(const DirectProgram& p, std::size_t pc, int r, std::uint64_t seq, bool guarded) const {
    if (!guarded) {
      if (synced_[static_cast<std::size_t>(r)] || seq == 1) return true;
      for (int q = 0; q < n_; ++q)
        if (q != r && !flag_ok(q, seq - 1, 1)) return false;
      return true;
    }
    const DirectOp& op = p.ops[pc];
    return op.kind != DirectOpKind::wait || flag_ok(op.rank, seq, op.step);
  }
  // The engine's rule: after an unsynced call, wait for one signal of every peer of it.
  void guard(int r, std::uint64_t seq) {
    if (synced_[static_cast<std::size_t>(r)] || seq == 1) return;
    for (int q = 0; q < n_; ++q)
      if (q != r) merge(r, q, seq - 1, direct_flag(seq - 1, 1));
  }
  void merge(int r, int q, std::uint64_t seq, std::uint64_t value) {
    for (const auto& [v, clock] : signals_[widx(q, seq)])
      if (v >= value) {
        auto& mine = clock_[static_cast<std::size_t>(r)];
        for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = std::max(mine[i], clock[i]);
        return;
      }
  }

  // A caller's buffer: its owner and which (0 input, 1 output; in place, both are 0).
  struct Buffer {
    int owner;
    int id;
  };
  // In call `seq`: the owner published the addresses of that call's buffers.
  Buffer buffer_of(const DirectRef& ref, int r, std::uint64_t seq) const {
    const bool peer = ref.space == DirectSpace::peer_input || ref.space == DirectSpace::peer_output;
    const int owner = peer ? ref.rank : r;
    const bool out = ref.space == DirectSpace::output || ref.space == DirectSpace::peer_output;
    const auto& calls = in_place_[static_cast<std::size_t>(owner)];
    return {owner, out && !(seq < calls.size() && calls[seq]) ? 1 : 0};
  }
  std::vector<std::int64_t>& storage(Buffer b) {
    return (b.id ? outs_ : ins_)[static_cast<std::size_t>(b.owner)];
  }

  std::byte* address(const DirectRef& ref, int r, std::uint64_t seq) {
    if (ref.space == DirectSpace::window) return win_[widx(ref.rank, seq)].data() + ref.offset;
    if (ref.space == DirectSpace::scratch) return scratch_[static_cast<std::size_t>(r)].data() + ref.offset;
    return reinterpret_cast<std::byte*>(storage(buffer_of(ref, r, seq)).data()) + ref.offset;
  }

  // Checks an access against every earlier conflicting one of `list` and records it.
  std::string order(std::vector<Access>& list, const DirectRef& ref, std::size_t bytes, bool write, int r,
                    std::uint64_t seq, const std::string& what) {
    const auto& me = clock_[static_cast<std::size_t>(r)];
    for (const Access& a : list) {
      if (a.rank == r || (!a.write && !write) || a.hi <= ref.offset || ref.offset + bytes <= a.lo) continue;
      if (a.clock[static_cast<std::size_t>(a.rank)] > me[static_cast<std::size_t>(a.rank)])
        return std::string(write ? "write" : "read") + " by rank " + std::to_string(r) + " in call " +
               std::to_string(seq) + " of " + what + " bytes [" + std::to_string(ref.offset) + ", +" +
               std::to_string(bytes) + ") races with a " + (a.write ? "write" : "read") + " by rank " +
               std::to_string(a.rank) + " in call " + std::to_string(a.call);
    }
    list.push_back({r, write, ref.offset, ref.offset + bytes, me, seq});
    return {};
  }

  // Records an access and checks it against every earlier conflicting one:
  // windows per slot, the callers' buffers across calls (a peer may read a
  // buffer only between its owner's filling it and its owner's return).
  std::string touch(const DirectRef& ref, std::size_t bytes, bool write, int r, std::uint64_t seq) {
    if (ref.space == DirectSpace::scratch)  // private: only bounds (no scratch larger than a window)
      return ref.offset + bytes <= window_ ? std::string()
                                           : "rank " + std::to_string(r) + " overruns its scratch: [" +
                                                 std::to_string(ref.offset) + ", +" + std::to_string(bytes) + ")";
    if (ref.space != DirectSpace::window) {
      const Buffer b = buffer_of(ref, r, seq);
      const std::size_t cap = storage(b).size() * 8;
      const std::string what = "rank " + std::to_string(b.owner) + "'s " + (b.id ? "output" : "input");
      if (ref.offset + bytes > cap)
        return "rank " + std::to_string(r) + " accesses [" + std::to_string(ref.offset) + ", +" +
               std::to_string(bytes) + ") of " + what + " (" + std::to_string(cap) + " B)";
      return order(buf_access_[static_cast<std::size_t>(b.owner) * 2 + static_cast<std::size_t>(b.id)], ref, bytes,
                   write, r, seq, what);
    }
    const bool in_line = ref.offset < 64;
    if (ref.offset < kDirectFlagBytes || ref.offset + bytes > window_ ||
        (in_line && ref.offset + bytes > kDirectSignatureOffset))
      return "rank " + std::to_string(r) + " accesses window bytes [" + std::to_string(ref.offset) + ", +" +
             std::to_string(bytes) + ") outside the data area of a " + std::to_string(window_) + "-byte window";
    if (write && ref.rank != r)
      return "rank " + std::to_string(r) + " writes rank " + std::to_string(ref.rank) + "'s window";
    return order(access_[widx(ref.rank, seq)], ref, bytes, write, r, seq, "window " + std::to_string(ref.rank));
  }

  std::string step(const DirectProgram& p, const DirectOp& op, int r, std::uint64_t seq) {
    auto& me = clock_[static_cast<std::size_t>(r)];
    ++me[static_cast<std::size_t>(r)];
    if (op.kind == DirectOpKind::signal) {
      flags_[widx(r, seq)] = direct_flag(seq, op.step);
      signals_[widx(r, seq)].push_back({direct_flag(seq, op.step), me});
      return {};
    }
    if (op.kind == DirectOpKind::wait) {
      merge(r, op.rank, seq, direct_flag(seq, op.step));
      return {};
    }
    if (op.bytes % 8) return "an operation of " + std::to_string(op.bytes) + " B is not whole elements";
    std::vector<std::int64_t> acc(op.bytes / 8, 0);
    for (std::uint32_t s = 0; s < op.num_srcs; ++s) {
      const DirectRef& src = p.srcs[op.first_src + s];
      if (std::string e = touch(src, op.bytes, false, r, seq); !e.empty()) return e;
      std::vector<std::int64_t> v(op.bytes / 8);
      std::memcpy(v.data(), address(src, r, seq), op.bytes);
      for (std::size_t i = 0; i < v.size(); ++i) acc[i] = s == 0 ? v[i] : acc[i] + v[i];
    }
    for (const DirectRef* dst : {&op.dst, op.has_dst2 ? &op.dst2 : nullptr}) {
      if (!dst) continue;
      if (std::string e = touch(*dst, op.bytes, true, r, seq); !e.empty()) return e;
      std::memcpy(address(*dst, r, seq), acc.data(), op.bytes);
    }
    return {};
  }

  int n_;
  std::size_t window_;
  std::mt19937_64 rng_;
  std::vector<std::vector<std::byte>> win_;
  std::vector<std::uint64_t> flags_;
  std::vector<std::vector<std::pair<std::uint64_t, std::vector<std::uint64_t>>>> signals_;
  std::vector<std::vector<Access>> access_;
  std::vector<std::vector<std::int64_t>> ins_, outs_;  // per rank, reused from call to call
  std::vector<std::vector<std::byte>> scratch_;        // per rank, private
  std::vector<std::vector<Access>> buf_access_;        // [rank * 2 + (0 input, 1 output)]
  std::vector<std::vector<bool>> in_place_;            // [rank][call]: that call is in place
  std::vector<std::vector<std::uint64_t>> clock_;
  std::vector<bool> synced_;
  std::vector<std::uint64_t> started_ = std::vector<std::uint64_t>(64, 0);
};

const DirectAlgorithm& find(Collective c, const char* name) {
  const DirectAlgorithm* a = find_direct_algorithm(c, name);
  REQUIRE(a != nullptr);
  return *a;
}

std::vector<const DirectAlgorithm*> data_algorithms() {
  std::vector<const DirectAlgorithm*> v;
  for (const DirectAlgorithm& a : all_direct_algorithms())
    if (a.collective != Collective::barrier) v.push_back(&a);
  return v;
}

}  // namespace

TEST_CASE("direct programs: every algorithm, alone and back to back, is correct and race-free") {
  // A 4 KiB window forces the chunked, three-section paths at modest counts.
  constexpr std::size_t kWindow = 4096;
  for (int n : {1, 2, 3, 4, 5, 8}) {
    for (const DirectAlgorithm* a : data_algorithms()) {
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, static_cast<std::size_t>(n) + 1,
                                std::size_t{300}, std::size_t{1003}}) {
        const int root = n > 1 ? n - 1 : 0;
        DirectArgs args{a->collective, 0, n, count, 8, root, kWindow};
        if (a->eligible && !a->eligible(args)) continue;
        // The same call three times over (the slots wrap), then mixed with a barrier and a broadcast;
        // all-reduce also in place (output == input), alternating with out of place.
        const bool ar = a->collective == Collective::allreduce;
        std::vector<CallSpec> calls{{a, count, root}, {a, count, root, ar}, {a, count, root, ar}};
        calls.push_back({&find(Collective::barrier, "mem_direct"), 0, 0});
        calls.push_back({&find(Collective::broadcast, "mem_direct"), 5, 0});
        calls.push_back({a, count, root});
        calls.push_back({a, count, root, ar});
        // Each seed is another interleaving; the sanitizers' quick sweep takes one.
        for (std::uint64_t seed = 1; seed <= (test::quick_sweep() ? 1u : 3u); ++seed) {
          Sim sim(n, kWindow, seed * 7919 + static_cast<std::uint64_t>(n));
          const std::string problem = sim.run(calls);
          INFO(a->name << " " << to_string(a->collective) << " n=" << n << " count=" << count << " seed=" << seed);
          CHECK(problem == "");
        }
      }
    }
  }
}

TEST_CASE("direct programs: unsynced programs are followed safely by any other") {
  constexpr std::size_t kWindow = 4096;
  const auto& bcast = find(Collective::broadcast, "mem_direct");
  const auto& red = find(Collective::reduce, "mem_direct");
  const auto& one = find(Collective::allreduce, "mem_oneshot");
  const auto& two = find(Collective::allreduce, "mem_twoshot");
  for (int n : {2, 3, 4}) {
    std::vector<CallSpec> calls{{&bcast, 700, 0}, {&bcast, 700, 1}, {&one, 3, 0}, {&red, 900, 1},
                                {&red, 900, 0},  {&two, 900, 0},   {&bcast, 1, 0}, {&one, 300, 0}};
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
      Sim sim(n, kWindow, seed);
      INFO("n=" << n << " seed=" << seed);
      CHECK(sim.run(calls) == "");
    }
  }
}

TEST_CASE("direct programs: synced flags, flag-in-data, chunking") {
  auto programs = [](const DirectAlgorithm& a, int n, std::size_t count, std::size_t window) {
    std::vector<DirectProgram> v;
    for (int r = 0; r < n; ++r) {
      ProgramBuilder b(r, n);
      a.build({a.collective, r, n, count, 4, 0, window}, b);
      v.push_back(std::move(b).finish());
    }
    analyse(v);
    return v;
  };
  const auto one = programs(find(Collective::allreduce, "mem_oneshot"), 4, 2, 1 << 20);
  for (const auto& p : one) {
    CHECK(p.synced);
    CHECK(p.steps == 1);
    CHECK(p.window_bytes == kDirectFlagBytes + 8);  // 8 B of data share the flag's cache line
  }
  const auto bc = programs(find(Collective::broadcast, "mem_direct"), 3, 100, 1 << 20);
  CHECK_FALSE(bc[0].synced);  // the root waits for nobody
  CHECK_FALSE(bc[1].synced);  // rank 1 knows of the root, not of rank 2
  const auto two = programs(find(Collective::allreduce, "mem_twoshot"), 2, 100000, 64 * 1024);
  CHECK(two[0].steps > 4);  // 400 KB through 64 KiB windows: chunked
  CHECK(two[0].window_bytes <= 64 * 1024);
  // Larger than one window: one-shot refuses, two-shot chunks.
  DirectArgs big{Collective::allreduce, 0, 2, 100000, 4, 0, 64 * 1024};
  CHECK_FALSE(find(Collective::allreduce, "mem_oneshot").eligible(big));
  CHECK(find(Collective::allreduce, "mem_twoshot").eligible(big));
}

TEST_CASE("direct programs: the executor runs mem_oneshot's programs, and only those, as the one-shot shape") {
  for (int n : {1, 2, 3, 8}) {
    for (const DirectAlgorithm* a : data_algorithms()) {
      for (std::size_t count : {std::size_t{1}, std::size_t{2}, std::size_t{300}}) {
        DirectArgs args{a->collective, 0, n, count, 4, 0, 1 << 20};
        if (a->eligible && !a->eligible(args)) continue;
        for (int r = 0; r < n; ++r) {
          args.rank = r;
          ProgramBuilder b(r, n);
          a->build(args, b);
          const DirectProgram p = std::move(b).finish();
          const auto shape = one_shot_shape(p, r, n, 4);
          const bool one_shot = a->collective == Collective::allreduce && a->name == "mem_oneshot" && n > 1;
          INFO(a->name << " " << to_string(a->collective) << " n=" << n << " count=" << count << " rank=" << r);
          REQUIRE(shape.has_value() == one_shot);
          if (!shape) continue;
          CHECK(shape->nranks == n);
          CHECK(shape->bytes == count * 4);
          CHECK(shape->elements == count);
          CHECK(shape->offset == p.ops[0].dst.offset);
          CHECK(shape->offset >= kDirectFlagBytes);
        }
      }
    }
  }
  // A program that waits for the same peer twice (and so not for another) is not the shape.
  ProgramBuilder b(0, 3);
  b.copy(ProgramBuilder::window(0, 64), ProgramBuilder::input(0), 8);
  const std::uint32_t step = b.signal();
  b.wait(1, step);
  b.wait(1, step);
  const std::vector<DirectRef> windows{ProgramBuilder::window(0, 64), ProgramBuilder::window(1, 64),
                                       ProgramBuilder::window(2, 64)};
  b.reduce(ProgramBuilder::output(0), windows, 8);
  CHECK_FALSE(one_shot_shape(std::move(b).finish(), 0, 3, 4).has_value());
}

TEST_CASE("direct cost model: one flag beats two for tiny data, two-shot wins large") {
  ComputeParams compute;
  DirectCosts costs;
  const auto& one = find(Collective::allreduce, "mem_oneshot");
  const auto& two = find(Collective::allreduce, "mem_twoshot");
  const std::size_t window = 8 << 20;
  auto at = [&](const DirectAlgorithm& a, int n, std::size_t bytes) {
    return predict_direct_us(a, {Collective::allreduce, 0, n, bytes / 4, 4, 0, window}, costs, compute);
  };
  for (int n : {2, 4, 8}) {
    CHECK(at(one, n, 8) > 0);
    CHECK(at(one, n, 8) < at(two, n, 8));
    CHECK(at(one, n, 8) == at(one, n, 8));  // deterministic
  }
  for (int n : {4, 8}) CHECK(at(two, n, 4 << 20) < at(one, n, 4 << 20));  // n reads of everything vs two passes
  CHECK(at(one, 2, 64 << 20) < 0);  // does not fit the window: ineligible
  CHECK(at(two, 2, 64 << 20) > at(two, 2, 4 << 20));
}

namespace {

// mem_peer_twoshot's shape without its last wait: a rank may return, and its
// caller refill its buffers, while a peer still reads its output.
void build_returns_early(const DirectArgs& a, ProgramBuilder& b) {
  using B = ProgramBuilder;
  const auto n = static_cast<std::size_t>(a.nranks), r = static_cast<std::size_t>(a.rank);
  b.wait_all(b.signal());
  const std::size_t mine = block_offset(a.count, n, r) * 8, len = block_size(a.count, n, r) * 8;
  std::vector<DirectRef> srcs;
  for (std::size_t p = 0; p < n; ++p) {
    if (p == r) {
      srcs.push_back(B::input(mine));
      continue;
    }
    srcs.push_back(B::scratch(p * len));
    b.copy(srcs.back(), B::peer_input(static_cast<int>(p), mine), len);
  }
  b.reduce(B::output(mine), srcs, len);
  b.wait_all(b.signal());
  for (std::size_t p = 0; p < n; ++p)
    if (p != r)
      b.copy(B::output(block_offset(a.count, n, p) * 8),
             B::peer_output(static_cast<int>(p), block_offset(a.count, n, p) * 8), block_size(a.count, n, p) * 8);
}

}  // namespace

TEST_CASE("direct programs: reads of peers' buffers are ordered before their owners return") {
  const DirectAlgorithm broken{"returns_early", Collective::allreduce, build_returns_early, nullptr, ""};
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Sim sim(2, 4096, seed);
    const std::string problem = sim.run({{&broken, 40, 0}, {&broken, 40, 0, true}, {&broken, 40, 0}});
    INFO(problem);
    CHECK(problem.find("races") != std::string::npos);  // the checker sees the hazard whatever the interleaving
  }
  for (const char* name : {"mem_peer_twoshot", "mem_peer_oneshot"}) {
    const auto& peer = find(Collective::allreduce, name);
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
      Sim sim(3, 4096, seed);
      INFO(name << " seed " << seed);
      CHECK(sim.run({{&peer, 40, 0}, {&peer, 40, 0, true}, {&peer, 40, 0}, {&peer, 41, 0, true}}) == "");
    }
  }
}

TEST_CASE("direct programs: mem_peer_oneshot holds every peer's input in one window, needs peer reads") {
  const auto& one = find(Collective::allreduce, "mem_peer_oneshot");
  const std::size_t window = 64 * 1024, room = window - kDirectPeerDataOffset;
  // 3 ranks: two peers' inputs of whole cache lines side by side.
  CHECK(one.eligible({Collective::allreduce, 0, 3, room / 2 / 4, 4, 0, window, true}));
  CHECK_FALSE(one.eligible({Collective::allreduce, 0, 3, room / 2 / 4 + 16, 4, 0, window, true}));
  CHECK_FALSE(one.eligible({Collective::allreduce, 0, 3, 100, 4, 0, window, false}));
  std::vector<DirectProgram> v;
  for (int r = 0; r < 3; ++r) {
    ProgramBuilder b(r, 3);
    one.build({Collective::allreduce, r, 3, 1000, 4, 0, window, true}, b);
    v.push_back(std::move(b).finish());
  }
  analyse(v);
  CHECK(v[0].reads_peers);
  CHECK(v[0].steps == 2);
  CHECK(v[0].synced);
  CHECK(v[0].ops.back().kind == DirectOpKind::reduce);  // nothing after the fold: no trailing wait
}

TEST_CASE("direct programs: mem_peer_twoshot needs peer reads, keeps the address line, chunks its scratch") {
  const auto& peer = find(Collective::allreduce, "mem_peer_twoshot");
  DirectArgs a{Collective::allreduce, 0, 4, 1 << 20, 4, 0, 64 * 1024, false};
  CHECK_FALSE(peer.eligible(a));  // no peer reads: not eligible
  a.peer_reads = true;
  CHECK(peer.eligible(a));
  a.nranks = 1;
  a.peer_reads = false;
  CHECK(peer.eligible(a));  // one rank reads nobody
  std::vector<DirectProgram> v;
  for (int r = 0; r < 4; ++r) {
    ProgramBuilder b(r, 4);
    peer.build({Collective::allreduce, r, 4, 1 << 20, 4, 0, 64 * 1024, true}, b);
    v.push_back(std::move(b).finish());
  }
  analyse(v);
  std::size_t peer_copies = 0;
  for (const DirectOp& op : v[1].ops) {
    const DirectSpace s = v[1].srcs[op.first_src].space;
    if (op.kind == DirectOpKind::copy && (s == DirectSpace::peer_input || s == DirectSpace::peer_output))
      ++peer_copies;
  }
  CHECK(v[1].reads_peers);
  CHECK(v[1].synced);
  CHECK(v[1].steps == 3);
  CHECK(v[1].window_bytes == 0);  // peers' data lands in private scratch, not in the window
  CHECK(v[1].scratch_bytes > 0);
  CHECK(v[1].scratch_bytes <= 64 * 1024);
  // 1 MiB of block 1 (1 MiB of 4 MiB) through 64 KiB windows: 3 peers x 17+ chunks, then 3 gathers.
  CHECK(peer_copies >= 3 * 17 + 3);
  // A program that reads peers must leave their addresses' line alone.
  ProgramBuilder bad(0, 2);
  bad.copy(ProgramBuilder::window(0, 64), ProgramBuilder::peer_input(1, 0), 8);
  CHECK_THROWS_AS(std::move(bad).finish(), comm::Error);
  ProgramBuilder own(0, 2);
  CHECK_THROWS_AS(own.copy(ProgramBuilder::output(0), ProgramBuilder::peer_input(0, 0), 8), comm::Error);
}

TEST_CASE("direct cost model: a peer read costs its fixed time and rate") {
  ComputeParams compute;
  DirectCosts costs;
  const auto& peer = find(Collective::allreduce, "mem_peer_twoshot");
  const DirectArgs a{Collective::allreduce, 0, 2, (256 << 10) / 4, 4, 0, 2 << 20, true};
  const double base = predict_direct_us(peer, a, costs, compute);
  CHECK(base > 0);
  DirectCosts slow = costs;
  slow.peer_read_us += 10.0;  // two reads per rank on 2 ranks (one per shot): 20 us more
  CHECK(predict_direct_us(peer, a, slow, compute) == doctest::Approx(base + 20.0).epsilon(0.01));
  DirectArgs none = a;
  none.peer_reads = false;
  CHECK(predict_direct_us(peer, none, costs, compute) < 0);
}
