#pragma once
// Processes on this host, as /proc shows them: whether one is still alive
// (zombie and pid-reuse aware), and the identities that say whether a pid
// seen elsewhere means anything here (boot id, pid namespace).

#include <optional>
#include <string>

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

}  // namespace comm::detail
