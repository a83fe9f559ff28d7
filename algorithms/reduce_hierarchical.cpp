// Hierarchical reduce: the mirror of the hierarchical broadcast. Inside each
// host the ranks reduce to the root's agent there (hierarchy.hpp) along a
// binomial tree, and the agents reduce to the root along a binomial tree over
// the hosts; an agent folds its own input, then its other hosts' partials,
// then its host's, in that fixed order, so the result does not depend on
// arrival order. One partial per chunk crosses from each host.

#include "algorithms/hierarchy.hpp"

namespace comm::algo {

void build_reduce_hierarchical(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0) return;
  HostGroups storage;
  const TreeLinks t = two_level_tree(hosts_of(a, storage), a.root, a.rank);
  tree_reduce(b, t.parent, t.kids, a.count, plan_chunks(a.count, a.chunk_elems, 1), out_region(0, a.count), 0, 0);
}

}  // namespace comm::algo
