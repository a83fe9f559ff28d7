// Hierarchical reduce-scatter: two direct rounds, one inside each host and
// one between hosts, so every block crosses from each host once. Round 1:
// within host g, block r of every rank goes to r's agent on g (hierarchy.hpp),
// which folds the host's contributions in local order. Round 2: each agent
// sends that host partial to r, which folds the H partials in host order into
// its output. Each rank sends at most (n/L) blocks' worth across hosts
// instead of the flat ring's (n-1) steps over the slowest link. The fold order
// is fixed, so results do not depend on arrival order.

#include "algorithms/hierarchy.hpp"

namespace comm::algo {

void build_reduce_scatter_hierarchical(const AlgoArgs& a, const HostPlace& at, ScheduleBuilder& b) {
  const HostGroups& h = at.hosts;
  const int n = a.nranks, H = at.num_hosts, g = at.host;
  const auto& members = at.members;
  const std::size_t L = members.size(), count = a.count;
  const auto tag_of = [n](int round, int block) { return checked_tag(static_cast<std::size_t>(round) * n + block); };

  // Round 1: send each block to its agent here; fold the blocks we are agent of.
  std::size_t slot = 0;  // scratch slots of `count` elements
  std::vector<Region> partial(static_cast<std::size_t>(n));  // our host partial of block r (agent blocks)
  std::vector<StepId> partial_ready(static_cast<std::size_t>(n), kNoStep);
  for (int r = 0; r < n; ++r) {
    const int ag = agent(h, g, r);
    const Region mine = in_region(static_cast<std::size_t>(r) * count, count);
    if (ag != a.rank) {
      b.send(ag, mine, tag_of(0, r));
      continue;
    }
    std::vector<Region> x(L);
    std::vector<StepId> got(L, kNoStep);
    for (std::size_t q = 0; q < L; ++q) {
      if (members[q] == a.rank) {
        x[q] = mine;
        continue;
      }
      x[q] = scratch_region(slot++ * count, count);
      got[q] = b.recv(members[q], x[q], tag_of(0, r));
    }
    const bool last = r == a.rank && H == 1;  // nothing left to add: straight to the output
    const Region acc = scratch_region(slot++ * count, count);
    partial[static_cast<std::size_t>(r)] = last ? out_region(0, count) : acc;
    partial_ready[static_cast<std::size_t>(r)] = fold_in_order(b, x, got, acc, partial[static_cast<std::size_t>(r)], {});
  }
  // Round 2: host partials to their owners; ours folded in host order.
  for (int r = 0; r < n; ++r)
    if (partial_ready[static_cast<std::size_t>(r)] != kNoStep && r != a.rank)
      b.send(r, partial[static_cast<std::size_t>(r)], tag_of(1, r), {partial_ready[static_cast<std::size_t>(r)]});
  if (H > 1) {
    std::vector<Region> x(static_cast<std::size_t>(H));
    std::vector<StepId> got(static_cast<std::size_t>(H), kNoStep);
    for (int o = 0; o < H; ++o) {
      if (o == g) {
        x[static_cast<std::size_t>(o)] = partial[static_cast<std::size_t>(a.rank)];
        got[static_cast<std::size_t>(o)] = partial_ready[static_cast<std::size_t>(a.rank)];
        continue;
      }
      x[static_cast<std::size_t>(o)] = scratch_region(slot++ * count, count);
      got[static_cast<std::size_t>(o)] = b.recv(agent(h, o, a.rank), x[static_cast<std::size_t>(o)], tag_of(1, a.rank));
    }
    fold_in_order(b, x, got, scratch_region(slot++ * count, count), out_region(0, count), {});
  }
  b.need_scratch(slot * count);
}

}  // namespace comm::algo
