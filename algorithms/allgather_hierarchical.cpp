// Hierarchical all-gather: two direct rounds. Round 1: every rank sends its
// block to its agent on every other host (hierarchy.hpp), so each block
// crosses to each other host exactly once. Round 2: inside each host, every
// rank passes the blocks it holds (its own and those it received as agent) to
// the host's other ranks. Pure data movement: every rank ends with the same
// bits as any other all-gather.

#include "algorithms/hierarchy.hpp"

namespace comm::algo {

void build_allgather_hierarchical(const AlgoArgs& a, const HostPlace& at, ScheduleBuilder& b) {
  const HostGroups& h = at.hosts;
  const int n = a.nranks, H = at.num_hosts, g = at.host;
  const std::size_t count = a.count;
  const auto block = [count](int r) { return out_region(static_cast<std::size_t>(r) * count, count); };
  const Region own = in_region(0, count);

  b.copy(block(a.rank), own);
  // Round 1 (tag 0): our block to our agent on every other host; as agent
  // here, the blocks of the other hosts' ranks we stand in for.
  for (int k = 1; k < H; ++k) b.send(agent(h, mod(g + k, H), a.rank), own, 0);
  std::vector<StepId> held(static_cast<std::size_t>(n), kNoStep);
  std::vector<bool> holds(static_cast<std::size_t>(n), false);
  holds[static_cast<std::size_t>(a.rank)] = true;
  for (int r = 0; r < n; ++r)
    if (h.host_of[static_cast<std::size_t>(r)] != g && agent(h, g, r) == a.rank) {
      held[static_cast<std::size_t>(r)] = b.recv(r, block(r), 0);
      holds[static_cast<std::size_t>(r)] = true;
    }
  // Round 2 (tag 1 + r): each block from the rank here that holds it to the others here.
  for (int r = 0; r < n; ++r) {
    const std::uint32_t tag = checked_tag(1 + static_cast<std::size_t>(r));
    const bool here = h.host_of[static_cast<std::size_t>(r)] == g;
    const int holder = here ? r : agent(h, g, r);
    if (holder == a.rank) {
      const Region src = r == a.rank ? own : block(r);
      for (int q : at.members)
        if (q != a.rank) b.send(q, src, tag, Deps{held[static_cast<std::size_t>(r)]});
    } else {
      b.recv(holder, block(r), tag);
    }
  }
}

}  // namespace comm::algo
