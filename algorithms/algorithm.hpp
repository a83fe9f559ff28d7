#pragma once
// Private interface between the core and the algorithm files. An algorithm is
// a pure function from (collective, rank, group size, sizes) to this rank's
// schedule; it never sees a transport, a buffer address, a dtype or an op.

#include <comm/schedule.hpp>
#include <comm/types.hpp>

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

namespace comm::algo {

// Which ranks share a machine, from the peer table (PeerTable::hosts): the
// fact hierarchical algorithms and node-aware rings are built on. Fixed for
// the life of a communicator, so plans need no extra cache key.
struct HostGroups {
  std::vector<std::vector<int>> members;  // ranks of each host, ascending; hosts ordered by lowest rank
  std::vector<int> host_of;               // rank -> its host's index in members
  std::vector<int> local_index;           // rank -> its position in members[host_of[rank]]

  int num_hosts() const { return static_cast<int>(members.size()); }
  int host_size(int host) const { return static_cast<int>(members[static_cast<std::size_t>(host)].size()); }
  int member(int host, int index) const {
    return members[static_cast<std::size_t>(host)][static_cast<std::size_t>(index)];
  }
  // Builds host_of and local_index from `members`, which must partition
  // [0, nranks) (throws invalid_argument naming the offending rank otherwise).
  static HostGroups of(std::vector<std::vector<int>> members, int nranks);
  // Every rank on one host.
  static HostGroups single(int nranks);
};

// Buffer conventions per collective (counts in elements):
//   allreduce       input[0,count) -> output[0,count); input may alias output.
//   reduce_scatter  input[0,nranks*count) -> output[0,count)
//   allgather       input[0,count) -> output[0,nranks*count)
//   broadcast       root: input[0,count); everyone: output[0,count). input and
//                   output alias on every rank (in-place API), so non-roots must
//                   only write output and roots must not write it at all.
//   reduce          input[0,count) -> output[0,count) on root only; non-roots
//                   must not touch output (use scratch).
//   all_to_all      input block j [j*count,(j+1)*count) -> rank j's output block rank.
//   all_to_allv     input[send_displs[j], +send_counts[j]) -> rank j's
//                   output[recv_displs[rank], +recv_counts[rank]).
//   barrier         count 0; exchanges zero-element messages only.
// Input/output aliasing: when `in_place` is set, input and output are one
// buffer (same address, same size): an algorithm must never read input[x]
// after a step has written output[x]. The executor passes in_place only for
// that exact form; any other overlap (the in-place allgather and
// reduce_scatter of the public API among them) it removes by copying the
// input first. Broadcast's buffers always alias, in_place or not.
struct AlgoArgs {
  Collective collective = Collective::allreduce;
  int rank = 0;
  int nranks = 1;
  std::size_t count = 0;
  std::size_t elem_size = 4;
  int root = 0;
  std::size_t chunk_elems = 1;  // pipeline chunk, >= 1 (from Config::chunk_bytes)
  bool in_place = false;        // input and output are the same buffer (see above)
  const HostGroups* hosts = nullptr;  // the group's hosts; null = every rank on one host
  std::span<const std::size_t> send_counts{};  // all_to_allv only, nranks entries each
  std::span<const std::size_t> send_displs{};
  std::span<const std::size_t> recv_counts{};
  std::span<const std::size_t> recv_displs{};
};

struct Algorithm {
  std::string_view name;  // user-visible id, e.g. "ring"
  Collective collective;
  // Builds a schedule for every AlgoArgs (any group size, count and root).
  void (*build)(const AlgoArgs& args, ScheduleBuilder& out);
  std::string_view summary;  // one line for comm-info / --help
};

// Every algorithm in the library (algorithms/registry.cpp lists them).
std::span<const Algorithm> all_algorithms();
// nullptr if there is no algorithm `name` for `c`.
const Algorithm* find_algorithm(Collective c, std::string_view name);

}  // namespace comm::algo
