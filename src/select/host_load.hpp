#pragma once
// Whether other work shared the CPUs while calibration measured. A profile
// measured on a busy host still serves the job that measured it, but caching
// it would make every later job of the setup choose by a bad measurement: a
// 2-rank shm job calibrated during a build once cached mem_twoshot at 7.9 ms
// for 1 MiB (0.17 ms on a quiet host), and auto then picked an algorithm 3x
// slower for every later job.
//
// Each rank samples, before and after, the busy and total jiffies of every CPU
// (/proc/stat) and its process's CPU time (getrusage). Ranks that share a
// kernel (one boot id: hosts emulated in namespaces share one) form a group;
// its CPUs are the union of its ranks' affinity masks, its own time is the CPU
// time of its processes (each counted once: thread ranks share one). Other
// work's share of a group's CPUs is
//   (busy jiffies on those CPUs - the group's own time) / total jiffies on them,
// and the communicator's is the largest over the groups.

#include <comm/store.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace comm {

struct HostLoadSample {
  std::vector<std::uint64_t> busy;   ///< per CPU: jiffies not idle (user, nice, system, irq, softirq, steal)
  std::vector<std::uint64_t> total;  ///< per CPU: all jiffies
  double process_cpu_s = 0;          ///< this process's user + system time
};

HostLoadSample sample_host_load();

struct OthersLoad {
  double share = 0;   ///< of the CPUs the busiest group may run on, kept busy by other work: 0..1
  std::string where;  ///< "CPUs 0-1 of rank 0's host", for the log
};

// Other work's share of the CPUs since `before` (see the file comment).
// Collective over the store: every rank calls it with its own sample; every
// rank gets the same answer.
OthersLoad others_load_since(const HostLoadSample& before, Store& store, int rank, int size,
                             std::chrono::milliseconds timeout);

// Exposed for the unit test: other work's share of `cpus` between two samples,
// `own_s` seconds of which were the group's own (clamped to 0..1; 0 when no
// jiffy passed).
double others_share(const HostLoadSample& before, const HostLoadSample& after, const std::vector<int>& cpus,
                    double own_s);

}  // namespace comm
