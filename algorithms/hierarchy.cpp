// Host groups, agents and two-level trees (hierarchy.hpp).

#include "algorithms/hierarchy.hpp"

namespace comm::algo {

const HostGroups& hosts_of(const AlgoArgs& a, HostGroups& storage) {
  if (a.hosts) {
    if (static_cast<int>(a.hosts->host_of.size()) != a.nranks)
      throw Error(ErrorCode::internal, "host layout describes " + std::to_string(a.hosts->host_of.size()) +
                                           " ranks, the group has " + std::to_string(a.nranks));
    return *a.hosts;
  }
  storage = HostGroups::single(a.nranks);
  return storage;
}

HostPlace place_of(const AlgoArgs& a, HostGroups& storage) {
  const HostGroups& h = hosts_of(a, storage);
  const int g = h.host_of[static_cast<std::size_t>(a.rank)];
  return {h, g, h.local_index[static_cast<std::size_t>(a.rank)], h.num_hosts(), h.members[static_cast<std::size_t>(g)]};
}

namespace {

using PlacedBuild = void (*)(const AlgoArgs&, const HostPlace&, ScheduleBuilder&);

// Nothing for an empty call, else build from this rank's place among the hosts.
void on_hosts(const AlgoArgs& a, ScheduleBuilder& b, PlacedBuild build) {
  if (a.count == 0) return;
  HostGroups storage;
  build(a, place_of(a, storage), b);
}

}  // namespace

void build_allreduce_hierarchical(const AlgoArgs& a, ScheduleBuilder& b) { on_hosts(a, b, build_allreduce_hierarchical); }
void build_allreduce_hierarchical_rail(const AlgoArgs& a, ScheduleBuilder& b) {
  on_hosts(a, b, build_allreduce_hierarchical_rail);
}
void build_reduce_scatter_hierarchical(const AlgoArgs& a, ScheduleBuilder& b) {
  on_hosts(a, b, build_reduce_scatter_hierarchical);
}
void build_allgather_hierarchical(const AlgoArgs& a, ScheduleBuilder& b) { on_hosts(a, b, build_allgather_hierarchical); }

TreeLinks binomial_over(const std::vector<int>& members, int root_index, int self_index) {
  const int n = static_cast<int>(members.size());
  const int v = relative(self_index, root_index, n);
  TreeLinks t;
  if (v != 0) t.parent = members[static_cast<std::size_t>(absolute(binomial_parent(v), root_index, n))];
  for (int kid : binomial_children(v, n)) t.kids.push_back(members[static_cast<std::size_t>(absolute(kid, root_index, n))]);
  return t;
}

TreeLinks two_level_tree(const HostGroups& h, int root, int rank) {
  const int g = h.host_of[static_cast<std::size_t>(rank)];
  const int root_host = h.host_of[static_cast<std::size_t>(root)];
  const auto& members = h.members[static_cast<std::size_t>(g)];
  const int me = h.local_index[static_cast<std::size_t>(rank)];
  const int my_agent = h.local_index[static_cast<std::size_t>(agent(h, g, root))];
  TreeLinks intra = binomial_over(members, my_agent, me);
  if (me != my_agent) return intra;
  // An agent: its place among the agents, hosts numbered from the root's.
  const int H = h.num_hosts();
  const int hv = relative(g, root_host, H);
  TreeLinks t;
  if (hv != 0) t.parent = agent(h, absolute(binomial_parent(hv), root_host, H), root);
  for (int kid : binomial_children(hv, H)) t.kids.push_back(agent(h, absolute(kid, root_host, H), root));
  t.kids.insert(t.kids.end(), intra.kids.begin(), intra.kids.end());
  return t;
}

}  // namespace comm::algo
