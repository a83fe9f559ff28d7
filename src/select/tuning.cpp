#include "select/tuning.hpp"

#include "select/calibration.hpp"
#include "select/calibration_measure.hpp"
#include "select/host_load.hpp"
#include "select/timing_plan.hpp"
#include "select/tuning_file.hpp"
#include "util/c_locale.hpp"
#include "util/log.hpp"
#include "util/sha256.hpp"

#include <comm/error.hpp>

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <comm/version.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

namespace comm {
namespace {

using Clock = std::chrono::steady_clock;

// How calibration measures, in the cache key: raised whenever a change makes
// an older cached tuning wrong, so that it is measured again rather than
// reused (the comm version stays the same between releases). 2: timed calls
// warmed by an untimed one up to the cache size; 3: direct-memory data at
// rotating window offsets (a different cost for every mem_* algorithm); 4: a
// native collective's call times are the slowest rank's per call, as for
// comm's own algorithms; 5: candidates timed in a carryover-balanced order; 6: an untimed algorithm
// predicted fastest at a timed size is timed there (timing_plan.hpp challenger_at); 7: a last
// size, 32 MiB, where the data comes from memory; 8: the links' transfer curves
// (LinkInfo::transfer_curve), from a ladder with 128 and 512 KiB rungs; 9: past
// the cache a turn starts with an untimed call too, the last size's turns time
// one call, warm-up rounds one call per candidate (timing_plan.hpp); 10: where
// a round of two contenders at the last size is too long, the most promising
// one is timed there alone (over TCP), within the budget; 11: up to three
// contenders at the last size, of three ways of moving the data (halves cut in
// chunks apart from halves sent whole), as many as the budget allows, and no
// warm-up round there; 12: shared-memory links' large-data beta from the
// host's copy rates (calibration.cpp, moved_by_copies); 13: the contender slots
// at 8 MiB go to ways of moving the data apart at the last size too; 14: a
// transport's own algorithm chosen at the last size by its curve's extension
// is timed there (core/algorithm_timing.cpp time_native_choice).
constexpr int kCalibrationRevision = 14;

// Libraries whose version changes what calibration measures.
constexpr const char* kLibraries[] = {"libcomm", "libucp", "libucs", "libuct", "libfabric", "libgloo", "libnccl",
                                      "libmpi"};

std::string first_line_with(const char* path, std::string_view prefix) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "?";
}

// path:size:mtime of every mapped library in kLibraries, sorted; with comm
// linked statically, of the executable that contains it.
std::string loaded_libraries() {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> paths;
  for (std::string line; std::getline(maps, line);) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string base = path.substr(path.rfind('/') + 1);
    for (const char* lib : kLibraries)
      if (base.rfind(lib, 0) == 0) paths.insert(path);
  }
  if (std::none_of(paths.begin(), paths.end(), [](const std::string& p) {
        return p.find("/libcomm") != std::string::npos;
      })) {
    char exe[4096] = {};
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) paths.insert(std::string(exe, static_cast<std::size_t>(n)));
  }
  std::string out;
  for (const auto& p : paths) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) continue;
    out += p + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtime) + ";";
  }
  return out;
}

std::string hex_id(const std::string& text) {
  std::array<char, 64> buf{};
  return std::string(detail::to_hex(detail::sha256(text), buf).substr(0, 16));
}

struct SetupKey {
  std::string id;
  std::string description;
};

// Every rank's fingerprint, the transport and its links, the world size.
SetupKey agreed_key(Transport& transport, Store& store, int rank, int size, const LinkMatrix& links,
                    std::chrono::milliseconds timeout) {
  store.set("tuning/fingerprint/" + std::to_string(rank), local_fingerprint());
  std::string text = "transport " + std::string(transport.name()) + "\nranks " + std::to_string(size) + "\n";
  std::set<std::string> details;
  for (const auto& l : links.links) details.insert(std::string(to_string(l.kind)) + " " + l.detail);
  for (const auto& d : details) text += "link " + d + "\n";
  std::set<std::string> hosts;
  for (int r = 0; r < size; ++r) {
    const std::string fp = store.get("tuning/fingerprint/" + std::to_string(r), timeout);
    text += "rank " + std::to_string(r) + " " + fp + "\n";
    hosts.insert(fp.substr(0, fp.find('|')));
  }
  std::string host_list;
  for (const auto& h : hosts) host_list += (host_list.empty() ? "" : ",") + h;
  const LinkInfo& l01 = links.at(0, size > 1 ? 1 : 0);
  return {hex_id(text), "transport " + std::string(transport.name()) + " (" + l01.detail + "); " +
                            std::to_string(size) + " ranks on " + host_list};
}

// mkdir -p; false if the directory cannot be made.
bool make_dirs(const std::string& dir) {
  for (std::size_t i = 1; i <= dir.size(); ++i)
    if (i == dir.size() || dir[i] == '/') {
      const std::string part = dir.substr(0, i);
      if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
  return true;
}

// Rank 0 saves; every rank learns the outcome, so an error is thrown everywhere alike.
void save_agreed(const std::string& path, bool explicit_file, Store& store, int rank, const LinkMatrix& links,
                 const ComputeParams& compute, const TuningExtras& extras, std::chrono::milliseconds timeout) {
  if (rank == 0) {
    std::string result = "ok";
    try {
      const std::string dir = explicit_file ? std::string() : path.substr(0, path.rfind('/'));
      if (!explicit_file && !make_dirs(dir))
        throw Error(ErrorCode::invalid_config, "cannot create the tuning cache directory '" + dir +
                                                   "': " + std::strerror(errno));
      save_tuning(path, links, compute, &extras);
      if (const std::size_t n = explicit_file ? 0 : prune_tuning_cache(dir, kMaxCachedTunings))
        COMM_INFO("calibration: removed " << n << " least recently used file(s) from the tuning cache " << dir
                                          << " (it keeps " << kMaxCachedTunings << ")");
    } catch (const Error& e) {
      result = std::string("error:") + e.what();
    }
    store.set("tuning/saved", result);
  }
  const std::string result = store.get("tuning/saved", timeout);
  if (result == "ok") return;
  if (explicit_file) throw Error(ErrorCode::invalid_config, result.substr(6));
  if (rank == 0) COMM_WARN("calibration: not cached (measured again next time): " << result.substr(6));
}

std::string describe_ms(Clock::time_point since) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
  return std::to_string(ms) + " ms";
}

// Rank 0 hosts the TCP store: it must not return (and perhaps exit) while
// another rank still reads what it published.
void finish_together(Store& store, int rank, int size, std::chrono::milliseconds timeout) {
  store.set("tuning/finished/" + std::to_string(rank), "1");
  if (rank != 0) return;
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("tuning/finished/" + std::to_string(r));
  store.wait(keys, timeout);
}

}  // namespace

std::vector<CacheCheck> cache_check_points(const NativeProfile& measured) {
  std::vector<CacheCheck> out;
  for (const std::size_t bytes : kTimingLadder) {
    if (bytes >= kContendersFrom) break;  // a call there costs milliseconds
    const std::size_t first = out.size();
    for (const NativeCurve& curve : measured.curves)
      for (const auto& [b, us] : curve.points)
        if (curve.collective == Collective::allreduce && b == bytes && us > 0)
          out.push_back({{curve.algorithm, bytes}, us, true});
    if (out.size() == first) continue;
    const auto fastest = std::min_element(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                                          [](const CacheCheck& a, const CacheCheck& b) { return a.cached_us < b.cached_us; });
    fastest->optional = false;
    std::rotate(out.begin() + static_cast<std::ptrdiff_t>(first), fastest, fastest + 1);  // the fastest first
  }
  return out;
}

std::string default_tuning_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return std::string(x) + "/comm";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/comm";
  return {};
}

void touch_cached_tuning(const std::string& path) noexcept { ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

std::size_t prune_tuning_cache(const std::string& dir, std::size_t keep) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> cached;
  std::size_t removed = 0;
  const auto now = fs::file_time_type::clock::now();
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const auto written = it->last_write_time(ec);
    if (ec || name.rfind("tuning-", 0) != 0) continue;
    if (name.find(".json.tmp.") != std::string::npos) {
      if (now - written > std::chrono::minutes(10) && fs::remove(it->path(), ec)) ++removed;
    } else if (name.ends_with(".json")) {
      cached.emplace_back(written, it->path());
    }
  }
  if (cached.size() <= keep) return removed;
  std::sort(cached.begin(), cached.end());  // least recently used first
  for (std::size_t i = 0; i + keep < cached.size(); ++i)
    if (fs::remove(cached[i].second, ec)) ++removed;
  return removed;
}

std::string local_fingerprint() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  cpu_set_t allowed;
  const int may_use = ::sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : -1;
  std::ostringstream os;
  os << host << "|comm " << version() << "|calibration " << kCalibrationRevision << "|cpu " << first_line_with("/proc/cpuinfo", "model name") << "|online "
     << ::sysconf(_SC_NPROCESSORS_ONLN) << "|allowed " << may_use << "|libs " << loaded_libraries();
  return os.str();
}

namespace {

// Why a cached tuning is stale ("" when it is not): a check point timed now
// under its cached time / kStaleCacheFactor.
std::string stale_because(const PointTimer& time_points, const LinkMatrix& links, const ComputeParams& compute,
                          const NativeProfile& native, const NativeProfile& measured) {
  if (!time_points) return {};
  const auto checks = cache_check_points(measured);
  if (checks.empty()) return {};
  const std::vector<double> now = time_points(links, compute, native, checks);
  for (std::size_t i = 0; i < checks.size() && i < now.size(); ++i)
    if (now[i] >= 0)
      COMM_DEBUG("calibration check: " << checks[i].point.algorithm << " at " << checks[i].point.bytes << " B: "
                                       << util::fixed(now[i], 1) << " us now, " << util::fixed(checks[i].cached_us, 1)
                                       << " us before");
  for (std::size_t i = 0; i < checks.size() && i < now.size(); ++i)
    if (const CacheCheck& c = checks[i]; now[i] >= 0 && now[i] * kStaleCacheFactor < c.cached_us)
      return c.point.algorithm + " at " + std::to_string(c.point.bytes) + " B took " + util::fixed(now[i], 1) +
             " us now against " + util::fixed(c.cached_us, 1) + " us cached";
  return {};
}

// Calibrates links, native collectives and comm's own algorithms into
// `links`, `compute` and `out`. A slow spell that ends during calibration
// would otherwise go into the file and be used until the next job's cache
// check: on this project's VM, shm's shared-window writes took 503 us at 1
// MiB in one calibration and 126 in the next, and auto ran `direct` at 2.5x
// the best from 2 MiB on. So the figures are checked at once as a cached
// file is, and measured once more if they already look slow.
void calibrate_checked(Transport& transport, Store& store, int rank, int size, int ranks_here, const Config& config,
                       LinkMatrix& links, ComputeParams& compute, const AlgorithmTimer& time_algorithms,
                       const PointTimer& time_points, TuningOutcome& out) {
  const LinkMatrix nominal_links = links;
  const ComputeParams nominal_compute = compute;
  calib::Scratch scratch;  // the memory both calibrations measure in, faulted once
  // `on`: the store the calibration's exchanges agree through; its keys are written once.
  const auto calibrate = [&](Store& on) {
    const auto began = Clock::now();
    links = nominal_links;
    compute = nominal_compute;
    calibrate_links(transport, on, scratch, rank, size, ranks_here, links, compute, config.timeout);
    if (NativeCollectives* native = transport.native())
      out.native = calibrate_native(*native, on, rank, size, config.timeout);
    if (time_algorithms)
      out.measured = time_algorithms(links, compute, out.native,
                                     std::chrono::duration<double, std::micro>(Clock::now() - began).count(), scratch);
  };
  calibrate(store);
  if (const std::string spell = stale_because(time_points, links, compute, out.native, out.measured);
      !spell.empty()) {
    if (rank == 0) COMM_INFO("calibration: the figures just measured look slow (" << spell << "); calibrating again");
    calibrate(*make_prefix_store(std::shared_ptr<Store>(&store, [](Store*) {}), "again/"));
  }
}

// Calibration off or impossible: the file named explicitly, else the nominal figures.
TuningOutcome without_calibration(Store& store, int rank, int size, const Config& config, LinkMatrix& links,
                                  ComputeParams& compute) {
  TuningOutcome out;
  TuningExtras ex;
  if (!config.tuning_file.empty() &&
      load_tuning_agreed(config.tuning_file, store, rank, links, compute, config.timeout, &ex)) {
    out.native = std::move(ex.native);
    out.measured = std::move(ex.measured);
    out.source = "tuning file " + config.tuning_file;
  } else {
    out.source = !config.calibrate ? "the transport's nominal figures (calibration off)"
                 : size == 1       ? "the transport's nominal figures (one rank: nothing to calibrate)"
                                   : "the transport's nominal figures (stream-ordered: not calibrated)";
  }
  return out;
}

TuningOutcome tune(Transport& transport, Store& store, int rank, int size, int ranks_here, const Config& config,
                   LinkMatrix& links, ComputeParams& compute, const AlgorithmTimer& time_algorithms,
                   const PointTimer& time_points) {
  const TransportCaps caps = transport.caps();
  const bool measurable = size > 1 && !caps.stream_ordered && caps.host_memory;
  if (!config.calibrate || !measurable) return without_calibration(store, rank, size, config, links, compute);

  TuningOutcome out;
  const bool explicit_file = !config.tuning_file.empty();
  const SetupKey key = agreed_key(transport, store, rank, size, links, config.timeout);
  const std::string dir = explicit_file ? std::string() : default_tuning_dir();
  const std::string path = explicit_file ? config.tuning_file : dir.empty() ? "" : dir + "/tuning-" + key.id + ".json";
  std::string stale_note;  // why a cached tuning is measured again
  if (!path.empty()) {
    LinkMatrix loaded = links;
    ComputeParams loaded_compute = compute;
    TuningExtras ex;
    bool found = false;
    try {
      found = load_tuning_agreed(path, store, rank, loaded, loaded_compute, config.timeout, &ex);
    } catch (const Error& e) {
      if (explicit_file) throw;
      if (rank == 0) COMM_WARN("calibration: ignoring the cached tuning file: " << e.what());
    }
    std::string checked;  // how long the check of a cached file took
    if (found && !explicit_file && ex.key_id == key.id) {
      const auto check_start = Clock::now();
      stale_note = stale_because(time_points, loaded, loaded_compute, ex.native, ex.measured);
      if (!stale_note.empty() && rank == 0)
        COMM_INFO("calibration: the cached tuning " << path << " was measured in a slow spell (" << stale_note
                                                    << "); calibrating again");
      if (time_points) checked = " (checked in " + describe_ms(check_start) + ")";
    }
    if (found && (explicit_file || ex.key_id == key.id) && stale_note.empty()) {
      if (explicit_file && ex.key_id != key.id && rank == 0)
        COMM_INFO("tuning file " << path << " was measured for "
                                 << (ex.key_description.empty() ? "another setup" : ex.key_description)
                                 << "; this job is " << key.description);
      if (!explicit_file && rank == 0) touch_cached_tuning(path);
      links = std::move(loaded);
      compute = loaded_compute;
      out.native = std::move(ex.native);
      out.measured = std::move(ex.measured);
      out.source = (explicit_file ? "tuning file " : "tuning cache ") + path + checked;
      return out;
    }
  }

  const auto t0 = Clock::now();
  const HostLoadSample load_before = sample_host_load();
  calibrate_checked(transport, store, rank, size, ranks_here, config, links, compute, time_algorithms, time_points,
                    out);
  out.source = "calibrated at creation (" + describe_ms(t0) + ")";
  if (!stale_note.empty()) out.source += ", replacing a cache measured in a slow spell (" + stale_note + ")";
  if (path.empty()) return out;
  const OthersLoad others = others_load_since(load_before, store, rank, size, config.timeout);
  const std::string busy = "other work kept " + util::fixed(100 * others.share, 0) + " % of " + others.where +
                           " busy while it measured";
  if (others.share > config.calibration_busy_limit && !explicit_file) {
    // Good enough for this job, but not for every later one (host_load.hpp).
    out.source += ", not cached: " + busy + " (COMM_CALIBRATION_BUSY_LIMIT " +
                  util::fixed(100 * config.calibration_busy_limit, 0) + " %)";
    return out;
  }
  if (others.share > config.calibration_busy_limit && rank == 0)
    COMM_WARN("calibration: " << busy << "; saved to " << path << " as asked, but later jobs will choose by it");
  TuningExtras ex{key.id, key.description, out.native, out.measured};
  save_agreed(path, explicit_file, store, rank, links, compute, ex, config.timeout);
  out.source += ", saved to " + path;
  return out;
}

}  // namespace

TuningOutcome tune_figures(Transport& transport, Store& store, int rank, int size, int ranks_here, const Config& config,
                           LinkMatrix& links, ComputeParams& compute, const AlgorithmTimer& time_algorithms,
                           const PointTimer& time_points) {
  TuningOutcome out =
      tune(transport, store, rank, size, ranks_here, config, links, compute, time_algorithms, time_points);
  if (size > 1) finish_together(store, rank, size, config.timeout);
  return out;
}

}  // namespace comm
