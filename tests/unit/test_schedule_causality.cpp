// Causality of every algorithm's schedules, for world sizes 1-64: all ranks'
// schedules run together in a simulation that matches each send with its
// receive by (source, destination, tag), and every step carries the set of
// ranks whose entry into the collective happens-before it finishes (a step
// knows what its dependencies know; a receive also learns what its sender
// knew when the send was posted). The values tests (test_schedules.cpp)
// cannot see a barrier that returns early: it moves no data. This one can.
//
// What must hold when a rank's part is complete (all of its steps done):
//   barrier, allreduce, allgather, reduce_scatter, all_to_all(v): every rank entered;
//   broadcast: the root entered;  reduce: at the root, every rank entered.

#include "algorithms/algorithm.hpp"

#include <comm/schedule.hpp>

#include <doctest/doctest.h>

#include <bitset>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

using namespace comm;

namespace {

constexpr int kMaxRanks = 64;
using Ranks = std::bitset<kMaxRanks>;

struct Knowledge {
  std::vector<Ranks> done;  // per rank: who happens-before its completion
  std::string error;        // "" or why the simulation could not finish
};

// Runs all ranks' schedules to completion, propagating happens-before sets.
Knowledge simulate(const std::vector<Schedule>& sched) {
  const int n = static_cast<int>(sched.size());
  Knowledge k;
  k.done.assign(static_cast<std::size_t>(n), Ranks{});
  std::vector<std::vector<Ranks>> at(static_cast<std::size_t>(n));  // per step, once finished
  std::vector<std::vector<std::uint32_t>> missing(static_cast<std::size_t>(n));
  std::vector<std::vector<StepId>> ready(static_cast<std::size_t>(n)), waiting(static_cast<std::size_t>(n));
  std::map<std::tuple<int, int, std::uint32_t>, Ranks> in_flight;  // (from, to, tag) -> sender's knowledge
  std::size_t total = 0, finished = 0;
  for (int r = 0; r < n; ++r) {
    const Schedule& s = sched[static_cast<std::size_t>(r)];
    at[static_cast<std::size_t>(r)].assign(s.steps.size(), Ranks{});
    total += s.steps.size();
    for (std::size_t i = 0; i < s.steps.size(); ++i) {
      missing[static_cast<std::size_t>(r)].push_back(s.steps[i].num_deps);
      if (s.steps[i].num_deps == 0) ready[static_cast<std::size_t>(r)].push_back(static_cast<StepId>(i));
    }
  }
  auto entry_of = [&](int r, StepId id) {  // what a step knows when it may start
    Ranks b;
    b.set(static_cast<std::size_t>(r));
    for (StepId d : sched[static_cast<std::size_t>(r)].deps_of(id)) b |= at[static_cast<std::size_t>(r)][d];
    return b;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      const auto ur = static_cast<std::size_t>(r);
      const Schedule& s = sched[ur];
      std::vector<StepId> todo;
      todo.swap(ready[ur]);
      for (StepId id : waiting[ur]) todo.push_back(id);
      waiting[ur].clear();
      while (!todo.empty()) {
        const StepId id = todo.back();
        todo.pop_back();
        const Step& st = s.steps[id];
        Ranks b = entry_of(r, id);
        if (st.kind == StepKind::send) {
          const auto key = std::make_tuple(r, st.peer, st.tag);
          if (in_flight.count(key)) {
            k.error = "rank " + std::to_string(r) + " sends tag " + std::to_string(st.tag) + " to rank " +
                      std::to_string(st.peer) + " twice";
            return k;
          }
          in_flight[key] = b;
        } else if (st.kind == StepKind::recv) {
          const auto it = in_flight.find(std::make_tuple(st.peer, r, st.tag));
          if (it == in_flight.end()) {
            waiting[ur].push_back(id);
            continue;
          }
          b |= it->second;
          in_flight.erase(it);
        }
        at[ur][id] = b;
        k.done[ur] |= b;
        ++finished;
        progress = true;
        for (StepId d : s.dependents_of(id))
          if (--missing[ur][d] == 0) todo.push_back(d);
      }
    }
  }
  if (finished != total)
    k.error = "deadlock: " + std::to_string(total - finished) + " of " + std::to_string(total) + " steps never ran";
  else if (!in_flight.empty())
    k.error = "a send is never received";
  for (int r = 0; r < n; ++r) k.done[static_cast<std::size_t>(r)].set(static_cast<std::size_t>(r));
  return k;
}

std::vector<Schedule> build_all(const algo::Algorithm& alg, int n, std::size_t count, int root,
                                std::vector<std::vector<std::size_t>>& v) {
  std::vector<Schedule> out;
  // all_to_allv: rank i sends (i + j) % 3 elements to j (zeros included).
  v.assign(static_cast<std::size_t>(4 * n), {});
  for (int r = 0; r < n; ++r) {
    auto& sc = v[static_cast<std::size_t>(4 * r)];
    auto& sd = v[static_cast<std::size_t>(4 * r + 1)];
    auto& rc = v[static_cast<std::size_t>(4 * r + 2)];
    auto& rd = v[static_cast<std::size_t>(4 * r + 3)];
    std::size_t sin = 0, sout = 0;
    for (int j = 0; j < n; ++j) {
      sc.push_back(static_cast<std::size_t>((r + j) % 3));
      sd.push_back(sin);
      sin += sc.back();
      rc.push_back(static_cast<std::size_t>((j + r) % 3));
      rd.push_back(sout);
      sout += rc.back();
    }
  }
  for (int r = 0; r < n; ++r) {
    algo::AlgoArgs a;
    a.collective = alg.collective;
    a.rank = r;
    a.nranks = n;
    a.count = count;
    a.root = root;
    a.chunk_elems = std::size_t{1} << 20;
    a.send_counts = v[static_cast<std::size_t>(4 * r)];
    a.send_displs = v[static_cast<std::size_t>(4 * r + 1)];
    a.recv_counts = v[static_cast<std::size_t>(4 * r + 2)];
    a.recv_displs = v[static_cast<std::size_t>(4 * r + 3)];
    ScheduleBuilder b;
    alg.build(a, b);
    out.push_back(std::move(b).finish());
  }
  return out;
}

// "" or the first rank whose completion does not follow an entry it must follow.
std::string check(const algo::Algorithm& alg, int n, std::size_t count, int root) {
  std::vector<std::vector<std::size_t>> v;
  const std::vector<Schedule> sched = build_all(alg, n, count, root, v);
  if (sched.empty()) return "";
  const Knowledge k = simulate(sched);
  if (!k.error.empty()) return k.error;
  for (int r = 0; r < n; ++r) {
    Ranks need;
    switch (alg.collective) {
      case Collective::broadcast: need.set(static_cast<std::size_t>(root)); break;
      case Collective::reduce:
        if (r == root)
          for (int q = 0; q < n; ++q) need.set(static_cast<std::size_t>(q));
        break;
      case Collective::barrier:
      case Collective::allreduce:
      case Collective::allgather:
      case Collective::reduce_scatter:
      case Collective::all_to_all:
      case Collective::all_to_allv:
        for (int q = 0; q < n; ++q) need.set(static_cast<std::size_t>(q));
        break;
      case Collective::send:
      case Collective::recv: break;
    }
    const Ranks lacking = need & ~k.done[static_cast<std::size_t>(r)];
    if (lacking.any()) {
      std::string who;
      for (int q = 0; q < n; ++q)
        if (lacking.test(static_cast<std::size_t>(q))) who += (who.empty() ? "" : ", ") + std::to_string(q);
      return "rank " + std::to_string(r) + " completes before rank(s) " + who + " entered";
    }
  }
  return "";
}

void sweep(Collective coll) {
  int cases = 0;
  for (const algo::Algorithm& alg : algo::all_algorithms()) {
    if (alg.collective != coll) continue;
    for (int n = 1; n <= kMaxRanks; ++n) {
      // One element (most blocks empty), and more elements than ranks.
      std::vector<std::size_t> counts{1, static_cast<std::size_t>(2 * n + 1)};
      if (coll == Collective::barrier) counts = {0};
      for (std::size_t count : counts) {
        std::vector<int> roots{0};
        if (coll == Collective::broadcast || coll == Collective::reduce) roots = {0, n / 2, n - 1};
        for (int root : roots) {
          INFO(to_string(coll), "/", alg.name, " n=", n, " count=", count, " root=", root);
          CHECK(check(alg, n, count, root) == "");
          ++cases;
        }
      }
    }
  }
  CHECK(cases > 0);
}

}  // namespace

TEST_CASE("causality: barrier completes only after every rank entered") { sweep(Collective::barrier); }
TEST_CASE("causality: allreduce") { sweep(Collective::allreduce); }
TEST_CASE("causality: reduce_scatter") { sweep(Collective::reduce_scatter); }
TEST_CASE("causality: allgather") { sweep(Collective::allgather); }
TEST_CASE("causality: broadcast") { sweep(Collective::broadcast); }
TEST_CASE("causality: reduce") { sweep(Collective::reduce); }
TEST_CASE("causality: all_to_all") { sweep(Collective::all_to_all); }
TEST_CASE("causality: all_to_allv") { sweep(Collective::all_to_allv); }

TEST_CASE("causality: the simulation sees a barrier that lets a rank through early") {
  // A hand-made "barrier" on 3 ranks where rank 2 only hears from rank 1:
  // rank 2 must be reported as completing before rank 0 entered.
  std::vector<Schedule> s(3);
  {
    ScheduleBuilder b;  // rank 0: sends to 1
    b.send(1, Region{BufferId::input, 0, 0}, 0);
    s[0] = std::move(b).finish();
  }
  {
    ScheduleBuilder b;  // rank 1: receives from 0 and, independently, sends to 2
    b.recv(0, Region{BufferId::output, 0, 0}, 0);
    b.send(2, Region{BufferId::input, 0, 0}, 0);
    s[1] = std::move(b).finish();
  }
  {
    ScheduleBuilder b;  // rank 2: receives from 1
    b.recv(1, Region{BufferId::output, 0, 0}, 0);
    s[2] = std::move(b).finish();
  }
  const Knowledge k = simulate(s);
  REQUIRE(k.error.empty());
  CHECK(k.done[1].test(0));
  CHECK(k.done[2].test(1));
  CHECK_FALSE(k.done[2].test(0));  // rank 1's send did not wait for its receive
}
