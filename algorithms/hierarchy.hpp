#pragma once
// Private to algorithms/: what the hierarchical algorithms share. A host
// group is the set of ranks on one machine (AlgoArgs::hosts, from the peer
// table); each host talks to the others through "agents", and every phase is
// one of the existing builders run over a host group or over the agents.
//
// Agents: the rank of host g that stands in for rank r there is the one with
// r's local index modulo g's size (agent(h, g, r)). On even hosts that is the
// rank in the same position, so each position is a rail (one NIC per GPU,
// UCC's split-rail); on uneven hosts (3 + 1) the small host's ranks serve
// several rails. On r's own host the agent is r itself.

#include "algorithms/builders.hpp"

#include <vector>

namespace comm::algo {

// a.hosts, or every rank on one host (held in `storage`) when it is null.
const HostGroups& hosts_of(const AlgoArgs& a, HostGroups& storage);

// This rank's place among the hosts of a.
struct HostPlace {
  const HostGroups& hosts;
  int host;                         // this rank's host
  int local;                        // its index there
  int num_hosts;
  const std::vector<int>& members;  // the ranks of its host
};
HostPlace place_of(const AlgoArgs& a, HostGroups& storage);

inline int agent(const HostGroups& h, int host, int rank) {
  return h.member(host, h.local_index[static_cast<std::size_t>(rank)] % h.host_size(host));
}

// This rank's place in a tree over a set of ranks.
struct TreeLinks {
  int parent = -1;          // -1 at the root
  std::vector<int> kids;    // in fold order (reduce); broadcast sends in reverse
};

// The two-level tree rooted at `root`: a binomial tree over the agents of the
// root (one per host, hosts numbered from the root's host), and under each
// agent a binomial tree over its host. An agent's kids are its inter-host
// kids, then its intra-host ones. Crosses between hosts num_hosts - 1 times.
TreeLinks two_level_tree(const HostGroups& h, int root, int rank);

// A binomial tree over members[] rooted at members[root_index].
TreeLinks binomial_over(const std::vector<int>& members, int root_index, int self_index);

}  // namespace comm::algo
