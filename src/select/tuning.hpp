#pragma once
// Where a communicator's link and compute figures come from, decided once at
// creation (collectively: every rank ends with identical figures).
//
//  - Config::calibrate (default on; COMM_CALIBRATE=0 turns it off): the
//    figures are measured (calibration.hpp, the transport's own
//    collectives: calibrate_native, and comm's own all-reduce algorithms:
//    AlgorithmTimer) unless a tuning file for this exact setup
//    exists, and the measurement is then saved there, so later runs skip it.
//    The file is Config::tuning_file (COMM_TUNING_FILE) if given, else one per
//    setup in the user's cache directory: $XDG_CACHE_HOME/comm, or
//    ~/.cache/comm, named tuning-<id>.json. The id hashes what the figures
//    depend on: every rank's host (name, CPU model, online CPUs, the CPUs it
//    may run on), the transport and its links as described, the world size,
//    and the shared libraries loaded for it (libcomm and the transport's
//    library: path, size, modification time), so a rebuild, an upgrade, a
//    different binding or a different host recalibrates.
//  - What was measured while other work kept more than
//    Config::calibration_busy_limit of the host's CPUs busy (host_load.hpp)
//    serves this job but is not cached; a file named explicitly is written
//    even so, with a warning.
//  - A file named explicitly is always used as it is (it may come from
//    another machine on purpose); a cached file is used only if its id
//    matches, and an unreadable cached file is measured over. Before a cached
//    file is trusted, its fastest algorithm at 64 KiB and at 1 MiB is timed
//    again, and the one there furthest behind the cost model (PointTimer,
//    cache_check_points; a few milliseconds): a point now under half its cached
//    time means the cache was measured in a slow spell that the CPU accounting
//    of host_load.hpp cannot see (on this project's VM: the link calibrated at
//    1.4 GB/s against 9.1 GB/s a job later; shared windows 8x slower for 20 s
//    and more), so the setup is calibrated again and the file replaced.
//    Figures just calibrated are checked the same way before they are saved,
//    and measured once more if they already look slow.
//  - Calibration off: the named tuning file if any, else the transports'
//    nominal figures.
// Single-rank groups and stream-ordered transports are not calibrated.

#include "select/cost_model.hpp"
#include "select/native_profile.hpp"

#include <comm/config.hpp>
#include <comm/store.hpp>
#include <comm/transport.hpp>

#include <functional>
#include <string>

namespace comm::calib {
class Scratch;  // select/calibration_measure.hpp
}  // namespace comm::calib

namespace comm {

struct TuningOutcome {
  NativeProfile native;    ///< measured native collective times (may be empty)
  NativeProfile measured;  ///< measured times of comm's own algorithms (may be empty)
  std::string source;      ///< where the figures came from, for the log and comm-info
};

// Times comm's own algorithms over the figures just calibrated (links,
// compute, the native curves), every rank at once, in what this rank's
// `calibration_elapsed_us` (its calibration's time so far) leaves of the
// target (select/timing_plan.hpp), its calls' buffers in `scratch` (the
// memory the calibration measured in, calibration_measure.hpp); collective.
// It may add points to the native curves (`native`: one the selector would
// choose past its last point is timed there). Called by tune_figures only when
// it calibrates, before the tuning file is written.
using AlgorithmTimer =
    std::function<NativeProfile(const LinkMatrix& links, const ComputeParams& compute, NativeProfile& native,
                                double calibration_elapsed_us, calib::Scratch& scratch)>;

// An all-reduce algorithm at one size, as timed by a PointTimer.
struct AlgorithmPoint {
  std::string algorithm;
  std::size_t bytes = 0;
  bool operator==(const AlgorithmPoint&) const = default;
};

// A point a cached tuning may be checked at, with its cached time.
struct CacheCheck {
  AlgorithmPoint point;
  double cached_us = 0;
  // Timed only if the timer finds it suspect; else always timed.
  bool optional = false;
};

// Times check points of a cached tuning now, over the figures given, every
// rank at once: every point not optional, and of the optional ones those it
// finds suspect (the communicator's: at each size the one furthest behind
// its cost model). Returns each point's time (the slowest rank's median;
// negative where not timed or the algorithm refused), the same on every rank.
using PointTimer = std::function<std::vector<double>(const LinkMatrix& links, const ComputeParams& compute,
                                                     const NativeProfile& native,
                                                     const std::vector<CacheCheck>& points)>;

// A cached point timed now at less than its cached time / kStaleCacheFactor
// makes the cache stale (see the file comment).
inline constexpr double kStaleCacheFactor = 2.0;

// The points a cached tuning is checked at: at each rung of the timing
// ladder below kContendersFrom (8 B, 4 KiB, 64 KiB, 1 MiB), the fastest of
// `measured` there, then every other algorithm measured there, optional. A
// slow spell may slow some algorithms only (on this project's VM, writes to
// shared windows while cross-memory reads kept their speed: mem_twoshot
// cached at 481 us at 1 MiB, 75 us a minute later), so the fastest alone does
// not show it. The smallest rungs are decode's and take microseconds to
// check. Whatever slows the direct-memory algorithms while the 8 B rung is
// timed stays in the file otherwise: a test build that made a system call in
// every direct-memory call was timed at 3.6 us for mem_oneshot at 8 B (0.21-
// 0.26 in eleven of twelve calibrations of the real one, 0.57 in the last),
// and every later job with that file ran recursive_doubling there at 0.55 us
// against 0.17; four of the 24 other two-rank shm files in this host's
// cache, written by earlier jobs, held mem_oneshot at 8 B at 0.56-54 us.
std::vector<CacheCheck> cache_check_points(const NativeProfile& measured);

// Collective over all ranks of the communicator; `store` is its private store.
// Overwrites `links` and `compute` with the figures chosen. Throws
// invalid_config for a malformed or unwritable tuning file named in `config`,
// timeout if a rank does not take part, or the transport's error.
// `ranks_here`: the ranks on this rank's host, itself included.
TuningOutcome tune_figures(Transport& transport, Store& store, int rank, int size, int ranks_here, const Config& config,
                           LinkMatrix& links, ComputeParams& compute, const AlgorithmTimer& time_algorithms = {},
                           const PointTimer& time_points = {});

// The cache directory for tuning files ("" if neither XDG_CACHE_HOME nor HOME is set).
std::string default_tuning_dir();

// The cache keeps the kMaxCachedTunings files used last. Every build of the
// library, host, transport and world shape has a key, and so a file, of its
// own: a directory nobody prunes grows with every upgrade (a development
// machine gathered 793 in a day). A file's modification time is its last
// use: creation touches the cached file it uses.
inline constexpr std::size_t kMaxCachedTunings = 128;
// Marks the cache file at `path` used now; a file that cannot be touched is left as it is.
void touch_cached_tuning(const std::string& path) noexcept;
// Removes the least recently used cache files ("tuning-<id>.json") in `dir`
// until at most `keep` remain, and writers' temporary files ("tuning-<id>.json
// .tmp.<pid>") older than ten minutes (a writer killed between writing and
// renaming); other files stay. Returns how many it removed.
std::size_t prune_tuning_cache(const std::string& dir, std::size_t keep);

// This rank's part of the setup key (host, binding, loaded libraries).
std::string local_fingerprint();

// Measures the transport's own collectives (all-reduce, every algorithm it
// offers) at a ladder of sizes, every rank at once, each iteration between
// native barriers; each call's time is the slowest rank's, and a size's time
// the median of its calls'. Collective.
NativeProfile calibrate_native(NativeCollectives& native, Store& store, int rank, int size,
                               std::chrono::milliseconds timeout);

}  // namespace comm
