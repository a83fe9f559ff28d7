#pragma once
// Processes on this host, as /proc shows them: whether one is still alive
// (zombie and pid-reuse aware), and the identities that say whether a pid
// seen elsewhere means anything here (boot id, pid namespace).

#include <optional>
#include <cstddef>
#include <string>
#include <string_view>

namespace comm::detail {

struct ProcessStat {
  char state = 0;                      ///< field 3 of /proc/<pid>/stat (R, S, D, T, Z, X, ...)
  unsigned long long start_ticks = 0;  ///< field 22: start time since boot, in clock ticks
};

/// /proc/<pid>/stat, or nullopt when the process does not exist (here).
std::optional<ProcessStat> read_process_stat(long pid);
/// False when `pid` has exited, is a zombie, or is another process now
/// (its start time differs from `start_ticks`; 0 skips that check).
bool process_alive(long pid, unsigned long long start_ticks);
/// The link text of /proc/self/ns/pid ("pid:[4026531836]"), "" if unreadable.
std::string pid_namespace();
/// /proc/sys/kernel/random/boot_id: differs between machines and boots.
std::string boot_id();

/// Shared-memory files (/dev/shm) a process leaves when it dies: comm's own,
/// named "comm-<transport>-<pid>-..." (comm_shm_prefix), and libfabric shm's
/// default "<pid>:<n>:<n>". Removes those of `pid`, which must be a process
/// of this host that has exited; returns how many were removed.
std::string comm_shm_prefix(std::string_view transport, long pid);
std::size_t remove_shm_files_of(long pid);

}  // namespace comm::detail
