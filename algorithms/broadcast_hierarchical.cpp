// Hierarchical broadcast: the root's data crosses to each other host once,
// down a binomial tree over one agent per host (hierarchy.hpp), and each agent
// spreads it inside its host down a binomial tree; pipelined in chunks, so an
// agent forwards chunk c inside its host while chunk c+1 is still crossing.
// Inter-host sends go first: their subtrees are the deepest.

#include "algorithms/hierarchy.hpp"

namespace comm::algo {

void build_broadcast_hierarchical(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0 || a.nranks == 1) return;
  HostGroups storage;
  const HostGroups& h = hosts_of(a, storage);
  const TreeLinks t = two_level_tree(h, a.root, a.rank);
  // Within each level the deepest subtree first (binomial kids come smallest first).
  const int g = h.host_of[static_cast<std::size_t>(a.rank)];
  std::vector<int> inter, intra;
  for (int k : t.kids) (h.host_of[static_cast<std::size_t>(k)] == g ? intra : inter).push_back(k);
  std::vector<int> kids(inter.rbegin(), inter.rend());
  kids.insert(kids.end(), intra.rbegin(), intra.rend());
  TreeBroadcastSpec spec;
  spec.root_src = in_region(0, a.count);
  tree_broadcast(b, t.parent, kids, a.count, plan_chunks(a.count, a.chunk_elems, 1), spec, 0);
}

}  // namespace comm::algo
