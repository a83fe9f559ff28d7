// The NCCL stream engine's issue order (transports/nccl/nccl_plan.cpp), for
// every algorithm of the library, checked without a GPU: every rank's schedule
// is planned into waves, then the ranks are simulated together under NCCL's
// rules — messages between two ranks match in posting order, a message
// completes only once its partner is posted (rendezvous, the strictest case),
// and a wave (one ncclGroup plus local steps) finishes only when all its
// messages have. The test asserts that the k-th send from A to B meets the
// k-th receive on B from A with the same tag and size (the pairing the host
// executor makes by tag) and that no group of ranks deadlocks.

#include "nccl_plan.hpp"

#include "algorithms/algorithm.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

using namespace comm;

namespace {

struct Posted {
  std::size_t wave;
  std::uint32_t tag;
  std::size_t count;
};

// Empty string when the ranks' plans match and finish; otherwise what went wrong.
std::string simulate(const std::vector<Schedule>& schedules) {
  const int n = static_cast<int>(schedules.size());
  std::vector<std::vector<nccl::Wave>> waves(n);
  // sends[{a,b}] in a's posting order, recvs[{a,b}] = receives on b from a in b's order.
  std::map<std::pair<int, int>, std::vector<Posted>> sends, recvs;
  // For each rank and wave: the (pair, index, is_send) of its messages.
  struct Msg {
    std::pair<int, int> pair;
    std::size_t index;
    bool send;
  };
  std::vector<std::vector<std::vector<Msg>>> msgs(n);
  for (int r = 0; r < n; ++r) {
    waves[r] = nccl::plan_waves(schedules[r]);
    msgs[r].resize(waves[r].size());
    for (std::size_t w = 0; w < waves[r].size(); ++w)
      for (StepId id : waves[r][w].messages) {
        const Step& st = schedules[r].steps[id];
        if (st.kind == StepKind::send) {
          auto& list = sends[{r, st.peer}];
          msgs[r][w].push_back({{r, st.peer}, list.size(), true});
          list.push_back({w, st.tag, st.src.count});
        } else if (st.kind == StepKind::recv) {
          auto& list = recvs[{st.peer, r}];
          msgs[r][w].push_back({{st.peer, r}, list.size(), false});
          list.push_back({w, st.tag, st.dst.count});
        }
      }
  }
  for (const auto& [pair, s] : sends) {
    const auto& rv = recvs[pair];
    const std::string which = "rank " + std::to_string(pair.first) + " -> rank " + std::to_string(pair.second);
    if (s.size() != rv.size())
      return which + ": " + std::to_string(s.size()) + " sends but " + std::to_string(rv.size()) + " receives";
    for (std::size_t k = 0; k < s.size(); ++k)
      if (s[k].tag != rv[k].tag || s[k].count != rv[k].count)
        return which + ": message " + std::to_string(k) + " sent with tag " + std::to_string(s[k].tag) +
               " meets the receive with tag " + std::to_string(rv[k].tag);
  }
  for (const auto& [pair, rv] : recvs)
    if (!sends.count(pair) && !rv.empty())
      return "rank " + std::to_string(pair.second) + " receives from rank " + std::to_string(pair.first) +
             ", which sends nothing";

  std::vector<std::size_t> cur(n, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < n; ++r) {
      if (cur[r] == waves[r].size()) continue;
      bool complete = true;
      for (const Msg& m : msgs[r][cur[r]]) {
        const int partner = m.send ? m.pair.second : m.pair.first;
        const Posted& other = m.send ? recvs[m.pair][m.index] : sends[m.pair][m.index];
        complete = complete && cur[partner] >= other.wave;
      }
      if (complete) {
        ++cur[r];
        moved = true;
      }
    }
  }
  for (int r = 0; r < n; ++r)
    if (cur[r] != waves[r].size())
      return "deadlock: rank " + std::to_string(r) + " stuck in wave " + std::to_string(cur[r]) + " of " +
             std::to_string(waves[r].size());
  return {};
}

}  // namespace

TEST_CASE("nccl plan: every algorithm matches in posting order and never deadlocks") {
  int checked = 0;
  for (const algo::Algorithm& a : algo::all_algorithms())
    for (int n : {1, 2, 3, 4, 5, 7, 8, 9, 13, 16})
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{1000}})
        for (std::size_t chunk : {std::size_t{1} << 20, std::size_t{3}})
          for (int root : {0, n - 1}) {
            // all_to_allv: rank i sends (i + 2j) % 4 elements to rank j, packed.
            std::vector<std::vector<std::size_t>> sc(n), sd(n), rc(n), rd(n);
            for (int i = 0; i < n; ++i)
              for (int j = 0; j < n; ++j) {
                sd[i].push_back(j ? sd[i].back() + sc[i].back() : 0);
                sc[i].push_back(static_cast<std::size_t>((i + 2 * j) % 4) * count);
                rd[i].push_back(j ? rd[i].back() + rc[i].back() : 0);
                rc[i].push_back(static_cast<std::size_t>((j + 2 * i) % 4) * count);
              }
            std::vector<Schedule> schedules;
            for (int r = 0; r < n; ++r) {
              algo::AlgoArgs args;
              args.collective = a.collective;
              args.rank = r;
              args.nranks = n;
              args.count = a.collective == Collective::barrier ? 0 : count;
              args.elem_size = 4;
              args.root = root;
              args.chunk_elems = chunk;
              if (a.collective == Collective::all_to_allv) {
                args.send_counts = sc[r];
                args.send_displs = sd[r];
                args.recv_counts = rc[r];
                args.recv_displs = rd[r];
              }
              ScheduleBuilder b;
              a.build(args, b);
              schedules.push_back(std::move(b).finish());
            }
            CAPTURE(a.name);
            CAPTURE(to_string(a.collective));
            CAPTURE(n);
            CAPTURE(count);
            CAPTURE(chunk);
            CAPTURE(root);
            const std::string problem = simulate(schedules);
            CHECK_MESSAGE(problem.empty(), problem);
            ++checked;
          }
  MESSAGE(checked << " (algorithm, ranks, count, chunk, root) cases planned and simulated");
  CHECK(checked > 1000);
}

TEST_CASE("nccl plan: schedule order, groups closed by dependencies, independent local steps first") {
  ScheduleBuilder b;
  const StepId s0 = b.send(1, {BufferId::input, 0, 4}, 1);
  const StepId r0 = b.recv(1, {BufferId::scratch, 0, 4}, 1);
  const StepId red = b.reduce({BufferId::output, 0, 4}, {BufferId::input, 0, 4}, {BufferId::scratch, 0, 4}, {r0});
  const StepId s1 = b.send(1, {BufferId::output, 0, 4}, 2, {red});
  const StepId cp = b.copy({BufferId::scratch, 4, 4}, {BufferId::input, 0, 4});
  const StepId r1 = b.recv(1, {BufferId::output, 4, 4}, 2);
  const StepId last = b.copy({BufferId::output, 8, 4}, {BufferId::output, 4, 4}, {r1});
  b.need_scratch(8);
  const auto waves = nccl::plan_waves(std::move(b).finish());
  REQUIRE(waves.size() == 3);
  CHECK(waves[0].local.empty());
  CHECK(waves[0].messages == std::vector<StepId>{s0, r0});
  // The reduction needs r0 (closes the group); the copy needs nothing and
  // runs before the second group, which s1 may join since red runs first.
  CHECK(waves[1].local == std::vector<StepId>{red, cp});
  CHECK(waves[1].messages == std::vector<StepId>{s1, r1});
  CHECK(waves[2].local == std::vector<StepId>{last});
  CHECK(waves[2].messages.empty());
  CHECK(nccl::plan_waves(ScheduleBuilder().finish()).empty());
}

TEST_CASE("nccl plan simulation: it does report deadlocks and mismatched pairs") {
  // Each rank receives before it sends, and its send needs that receive: a
  // real deadlock under any transport.
  std::vector<Schedule> cyclic;
  for (int r = 0; r < 2; ++r) {
    ScheduleBuilder b;
    const StepId got = b.recv(1 - r, {BufferId::output, 0, 4}, 0);
    b.send(1 - r, {BufferId::output, 0, 4}, 0, {got});
    cyclic.push_back(std::move(b).finish());
  }
  CHECK(simulate(cyclic).find("deadlock") != std::string::npos);

  // Rank 0 posts tags 1, 2; rank 1 receives 2 then 1: NCCL would pair them wrongly.
  std::vector<Schedule> crossed;
  {
    ScheduleBuilder b;
    b.send(1, {BufferId::input, 0, 4}, 1);
    b.send(1, {BufferId::input, 4, 4}, 2);
    crossed.push_back(std::move(b).finish());
  }
  {
    ScheduleBuilder b;
    b.recv(0, {BufferId::output, 0, 4}, 2);
    b.recv(0, {BufferId::output, 4, 4}, 1);
    crossed.push_back(std::move(b).finish());
  }
  CHECK(simulate(crossed).find("meets the receive with tag") != std::string::npos);
}
