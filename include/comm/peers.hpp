#pragma once
/// \file peers.hpp
/// The peer table: what every rank of a communicator is, exchanged once at
/// creation through the store and handed to every transport
/// (TransportInit::peers) and to the selector. Hosts — groups of ranks that
/// share one machine — are derived from it, so "same host" means the same
/// thing to every transport, to the cost model and to comm-info.
///
/// Immutable after creation; safe to read from any thread.

#include <comm/export.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace comm {

/// One rank as it described itself at creation.
struct PeerInfo {
  /// Host identity: hostname, kernel boot id and network namespace. Equal
  /// strings mean one machine whose memory and loopback both ranks share;
  /// two containers (or emulated hosts) with their own network namespace
  /// are different hosts even on one kernel.
  std::string host;
  std::string hostname;  ///< for messages
  std::int64_t pid = 0;
  /// With `pid`, tells this process from a later one reusing its pid: its
  /// start time since boot in clock ticks (/proc/<pid>/stat field 22).
  std::uint64_t start_ticks = 0;
  /// The pid namespace ("pid:[4026531836]"): a pid means something to
  /// another rank only in the same one ("" if unreadable).
  std::string pid_namespace;
  int device = -1;       ///< Config::device (CUDA ordinal) if set, else -1
  int host_index = 0;    ///< index of this rank's host in PeerTable::hosts
  int local_rank = 0;    ///< position among the ranks of its host, in rank order
};

/// Every rank's PeerInfo plus the hosts they form.
struct COMM_API PeerTable {
  std::vector<PeerInfo> peers;            ///< indexed by rank
  /// The ranks of each host, ascending; hosts are ordered by their lowest rank.
  std::vector<std::vector<int>> hosts;

  int size() const noexcept { return static_cast<int>(peers.size()); }
  const PeerInfo& operator[](int rank) const { return peers.at(static_cast<std::size_t>(rank)); }
  int num_hosts() const noexcept { return static_cast<int>(hosts.size()); }
  bool same_host(int a, int b) const { return (*this)[a].host_index == (*this)[b].host_index; }
  /// Same host and same process id: ranks that are threads of one process.
  bool same_process(int a, int b) const { return same_host(a, b) && (*this)[a].pid == (*this)[b].pid; }
  /// The ranks sharing `rank`'s host (including it), ascending.
  const std::vector<int>& host_ranks(int rank) const {
    return hosts.at(static_cast<std::size_t>((*this)[rank].host_index));
  }
  /// `b`'s pid names the same process to `a` (same host, same pid
  /// namespace), so `a` can tell from /proc whether `b` is still alive.
  bool pid_visible(int a, int b) const {
    const PeerInfo &pa = (*this)[a], &pb = (*this)[b];
    return same_host(a, b) && !pa.pid_namespace.empty() && pa.pid_namespace == pb.pid_namespace;
  }
  /// Every rank is a thread of one process.
  bool one_process() const;

  /// Fills host_index, local_rank and hosts from the peers' host strings.
  void index_hosts();
  /// One line per host: "host 0 (name): ranks 0, 1".
  std::string describe() const;
};

/// This process's host identity (see PeerInfo::host).
COMM_API std::string host_identity();

}  // namespace comm
