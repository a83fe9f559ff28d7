// Where a communicator's figures come from: start-up calibration, the
// per-setup tuning cache, an explicit tuning file, and the measured curves of
// native collectives (select/tuning.hpp, select/native_profile.hpp).
#include "select/calibration_measure.hpp"
#include "select/selector.hpp"
#include "select/tuning.hpp"
#include "select/tuning_file.hpp"
#include "local_group.hpp"
#include "select_fixtures.hpp"

#include <comm/comm.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <sys/stat.h>
#include <exception>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace comm;

namespace {

// A nominal latency of one second: no measurement comes near it, even with
// the ranks' threads on busy cores (CI has measured 4 ms).
constexpr double kNominalAlphaUs = 1e6;
LinkMatrix nominal(int n) { return test::uniform_links(n, LinkKind::shm, kNominalAlphaUs, 0.001, "local"); }

struct RankResult {
  LinkMatrix links;
  ComputeParams compute;
  TuningOutcome outcome;
};

// tune_figures on n threads over the local transport, as creation runs it.
std::vector<RankResult> tune(int n, const Config& base, const AlgorithmTimer& timer = {},
                             const PointTimer& points = {}) {
  std::vector<RankResult> out(static_cast<std::size_t>(n));
  test::run_transports(n, base, [&](int r, Transport& t, Store& store, const Config& cfg) {
    RankResult& mine = out[static_cast<std::size_t>(r)];
    mine.links = nominal(n);
    mine.outcome = tune_figures(t, store, r, n, n, cfg, mine.links, mine.compute, timer, points);
  });
  return out;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') names.emplace_back(e->d_name);
    ::closedir(d);
  }
  return names;
}

// A private XDG_CACHE_HOME for the duration of a test.
struct TempCache {
  std::string root;
  std::string old;
  bool had_old = false;
  TempCache() {
    char tmpl[] = "/tmp/comm-tuning-test-XXXXXX";
    root = ::mkdtemp(tmpl);
    if (const char* o = std::getenv("XDG_CACHE_HOME")) {
      had_old = true;
      old = o;
    }
    ::setenv("XDG_CACHE_HOME", root.c_str(), 1);
  }
  ~TempCache() {
    if (had_old) ::setenv("XDG_CACHE_HOME", old.c_str(), 1);
    else ::unsetenv("XDG_CACHE_HOME");
    for (const auto& f : files_in(root + "/comm")) std::remove((root + "/comm/" + f).c_str());
    ::rmdir((root + "/comm").c_str());
    ::rmdir(root.c_str());
  }
  std::string dir() const { return root + "/comm"; }
};

// Writes `ex` with nominal 2-rank links to a fresh temporary tuning file and
// returns what load_tuning reads back; the file is removed.
TuningExtras round_trip(const TuningExtras& ex) {
  char tmpl[] = "/tmp/comm-tuning-extras-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  REQUIRE(fd >= 0);
  ::close(fd);
  const std::string path = tmpl;
  save_tuning(path, nominal(2), ComputeParams{}, &ex);
  LinkMatrix m = nominal(2);
  ComputeParams c;
  TuningExtras back;
  const bool loaded = load_tuning(path, m, c, &back);
  std::remove(path.c_str());
  REQUIRE(loaded);
  return back;
}

}  // namespace

TEST_CASE("a native curve interpolates between measured sizes and extends past them") {
  NativeProfile p;
  CHECK(p.predict(Collective::allreduce, "native", 64) < 0);  // no curve: no prediction
  p.set(Collective::allreduce, "native", {{1 << 20, 1000.0}, {8, 100.0}, {4096, 140.0}});  // sorted on set
  CHECK(p.predict(Collective::allreduce, "native", 1) == 100.0);
  CHECK(p.predict(Collective::allreduce, "native", 4096) == 140.0);
  CHECK(p.predict(Collective::allreduce, "native", 2052) == doctest::Approx(120.0));
  CHECK(p.predict(Collective::allreduce, "native_bcube", 64) < 0);
  CHECK(p.predict(Collective::broadcast, "native", 64) < 0);
  const double slope = (1000.0 - 140.0) / ((1 << 20) - 4096);
  CHECK(p.predict(Collective::allreduce, "native", 2 << 20) == doctest::Approx(1000.0 + slope * (1 << 20)));
  CHECK(p.predict(Collective::allreduce, "native", 64 << 20) == doctest::Approx(1000.0 + slope * (63 << 20)));
}

// A native all-reduce whose calls are slow on alternate ranks: rank 0 on its
// even-numbered calls, rank 1 on its odd ones. Every call of the pair is as
// slow as its slow rank, so every call took at least kSlow; each rank alone
// was slow on only half of its calls.
class AlternatelySlowNative : public NativeCollectives {
 public:
  static constexpr auto kSlow = std::chrono::milliseconds(4);
  explicit AlternatelySlowNative(int rank) : rank_(rank) {}
  std::vector<std::string> algorithms(Collective c) const override {
    return c == Collective::allreduce ? std::vector<std::string>{"native"} : std::vector<std::string>{};
  }
  bool supports(const CollectiveArgs&, std::string_view, std::string*) const override { return true; }
  double predict_us(Collective, std::string_view, std::size_t) const override { return -1; }
  void run(const CollectiveArgs&, std::string_view) override {
    if (calls_++ % 2 == static_cast<unsigned>(rank_)) std::this_thread::sleep_for(kSlow);
  }

 private:
  int rank_;
  unsigned calls_ = 0;
};

TEST_CASE("a native collective's calibrated time is each call's slowest rank, not the slowest rank's median") {
  auto store = make_memory_store();
  NativeProfile profiles[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      AlternatelySlowNative native(r);
      profiles[r] = calibrate_native(native, *store, r, 2, std::chrono::milliseconds(10000));
    });
  for (auto& t : ranks) t.join();
  const NativeCurve* curve = profiles[0].find(Collective::allreduce, "native");
  REQUIRE(curve);
  REQUIRE(curve->points.size() >= 3);
  const double slow_us = std::chrono::duration<double, std::micro>(AlternatelySlowNative::kSlow).count();
  for (const auto& [bytes, us] : curve->points) {
    INFO("at " << bytes << " B");
    // A rank's own median of alternately slow and fast calls is half of that
    // or less; the pairs' median is the slow time.
    CHECK(us >= slow_us);
  }
  CHECK(profiles[1].find(Collective::allreduce, "native")->points == curve->points);  // every rank alike
}

TEST_CASE("tuning file version 3 keeps the key and the native curves") {
  TuningExtras ex;
  ex.key_id = "0123456789abcdef";
  ex.key_description = "transport gloo; 2 ranks";
  ex.native.set(Collective::allreduce, "native", {{8, 150.5}, {4096, 200.25}});
  ex.native.set(Collective::allreduce, "native_bcube", {{8, 170}});
  TuningExtras back = round_trip(ex);
  CHECK(back.key_id == ex.key_id);
  CHECK(back.key_description == ex.key_description);
  REQUIRE(back.native.curves.size() == 2);
  CHECK(back.native.predict(Collective::allreduce, "native", 4096) == 200.25);
  CHECK(back.native.predict(Collective::allreduce, "native_bcube", 8) == 170);
}

TEST_CASE("calibration runs once per setup, is cached, and is reused by later communicators") {
  TempCache cache;
  Config cfg;  // calibrate is on by default
  REQUIRE(cfg.calibrate);
  cfg.calibration_busy_limit = 1;  // cache even on a busy CI machine (test_host_load.cpp tests the limit)
  const auto first = tune(2, cfg);
  CHECK(first[0].outcome.source.find("calibrated at creation") == 0);
  const auto files = files_in(cache.dir());
  REQUIRE(files.size() == 1);
  CHECK(files[0].rfind("tuning-", 0) == 0);
  CHECK(first[0].links.at(0, 1).alpha_us < kNominalAlphaUs / 10);  // measured, not the nominal
  for (const auto& r : first) {  // every rank ends with the same figures
    CHECK(r.links.at(0, 1).alpha_us == first[0].links.at(0, 1).alpha_us);
    CHECK(r.compute.reduce_gbps == first[0].compute.reduce_gbps);
  }

  const auto second = tune(2, cfg);
  CHECK(second[0].outcome.source == "tuning cache " + cache.dir() + "/" + files[0]);
  CHECK(second[1].outcome.source == second[0].outcome.source);
  CHECK(second[0].links.at(0, 1).alpha_us == doctest::Approx(first[0].links.at(0, 1).alpha_us).epsilon(1e-5));
  CHECK(second[1].compute.copy_gbps == doctest::Approx(first[0].compute.copy_gbps).epsilon(1e-5));

  // Another world shape is another setup: measured and cached separately.
  const auto three = tune(3, cfg);
  CHECK(three[0].outcome.source.find("calibrated at creation") == 0);
  CHECK(files_in(cache.dir()).size() == 2);

  // Calibration off: the nominal figures, nothing read.
  Config off = cfg;
  off.calibrate = false;
  const auto nominal_run = tune(2, off);
  CHECK(nominal_run[0].links.at(0, 1).alpha_us == kNominalAlphaUs);
  CHECK(nominal_run[0].outcome.source.find("calibration off") != std::string::npos);
}

namespace {

// Puts `path`'s modification time `age_s` seconds into the past.
void age_file(const std::string& path, long age_s) {
  timespec times[2];
  ::clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= age_s;
  times[1] = times[0];
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}
long age_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return static_cast<long>(::time(nullptr) - st.st_mtim.tv_sec);
}
bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST_CASE("the tuning cache keeps the files used last, and a file is used when a cache hit reads it") {
  TempCache cache;
  Config cfg;
  cfg.calibration_busy_limit = 1;
  tune(2, cfg);
  REQUIRE(files_in(cache.dir()).size() == 1);
  const std::string used = files_in(cache.dir())[0];
  age_file(cache.dir() + "/" + used, 10 * 86400);
  // Files of other setups, 1 to kMaxCachedTunings + 10 hours old, and others.
  const std::size_t others = kMaxCachedTunings + 10;
  for (std::size_t i = 0; i < others; ++i) {
    const std::string path = cache.dir() + "/tuning-other-" + std::to_string(i) + ".json";
    std::ofstream(path) << "{}";
    age_file(path, 3600 * static_cast<long>(i + 1));
  }
  for (const auto& [name, age] : std::vector<std::pair<std::string, long>>{
           {"notes.txt", 30 * 86400}, {"tuning-a.json.tmp.1", 3600}, {"tuning-b.json.tmp.2", 0}}) {
    std::ofstream(cache.dir() + "/" + name) << "x";
    age_file(cache.dir() + "/" + name, age);
  }

  const auto hit = tune(2, cfg);
  CHECK(hit[0].outcome.source == "tuning cache " + cache.dir() + "/" + used);
  CHECK(age_of(cache.dir() + "/" + used) < 60);  // used now, no longer the oldest

  // Another setup calibrates and saves; the cache then holds the files used last.
  tune(3, cfg);
  const auto names = files_in(cache.dir());
  std::size_t cached = 0;
  for (const auto& n : names) cached += n.rfind("tuning-", 0) == 0 && n.size() > 5 && n.ends_with(".json");
  CHECK(cached == kMaxCachedTunings);
  CHECK(has(names, used));
  CHECK(has(names, "tuning-other-0.json"));                                     // an hour old: kept
  CHECK(!has(names, "tuning-other-" + std::to_string(others - 1) + ".json"));  // the oldest: removed
  CHECK(has(names, "notes.txt"));                                               // not the cache's
  CHECK(!has(names, "tuning-a.json.tmp.1"));  // a writer's leftover from an hour ago
  CHECK(has(names, "tuning-b.json.tmp.2"));   // a writer's file of now
}

TEST_CASE("a cached tuning whose fastest points now time under half their cached times is measured again") {
  TempCache cache;
  Config cfg;
  cfg.calibration_busy_limit = 1;
  std::atomic<int> calibrations{0};
  // comm's own algorithms as a slow spell timed them: tree fastest at 8 B, ring at 64 KiB and 1 MiB.
  const AlgorithmTimer slow_spell = [&](const LinkMatrix&, const ComputeParams&, const NativeProfile&, double,
                                       calib::Scratch&) {
    ++calibrations;
    NativeProfile p;
    p.set(Collective::allreduce, "ring", {{8, 5.0}, {65536, 100.0}, {std::size_t{1} << 20, 2000.0}});
    p.set(Collective::allreduce, "tree", {{8, 4.0}, {65536, 150.0}, {std::size_t{1} << 20, 3000.0}});
    return p;
  };
  calib::Scratch scratch;
  NativeProfile no_native;
  const auto checks = cache_check_points(slow_spell({}, {}, no_native, 0, scratch));
  calibrations = 0;
  // At each rung of the ladder up to 1 MiB that was measured, the fastest, then the others, optional.
  REQUIRE(checks.size() == 6);
  CHECK(checks[0].point == AlgorithmPoint{"tree", 8});
  CHECK(!checks[0].optional);
  CHECK(checks[1].point == AlgorithmPoint{"ring", 8});
  CHECK(checks[1].cached_us == 5.0);
  CHECK(checks[1].optional);
  CHECK(checks[2].point == AlgorithmPoint{"ring", 65536});
  CHECK(checks[2].cached_us == 100.0);
  CHECK(!checks[2].optional);
  CHECK(checks[3].point == AlgorithmPoint{"tree", 65536});
  CHECK(checks[3].optional);
  CHECK(checks[4].point == AlgorithmPoint{"ring", std::size_t{1} << 20});
  CHECK(!checks[4].optional);
  CHECK(checks[5].point == AlgorithmPoint{"tree", std::size_t{1} << 20});
  CHECK(checks[5].cached_us == 3000.0);
  CHECK(checks[5].optional);
  std::vector<AlgorithmPoint> asked;  // the points the timer must time
  std::mutex mu;
  // Times tree at 8 B in at_8 and ring at 64 KiB and 1 MiB in at_64k and at_1m;
  // the suspects it is given: ring at 8 B in ring_8, tree at 1 MiB in tree_1m.
  auto timing = [&](double at_64k, double at_1m, double tree_1m = -1, double at_8 = 4.0, double ring_8 = -1) {
    return PointTimer([&, at_64k, at_1m, tree_1m, at_8, ring_8](const LinkMatrix&, const ComputeParams&,
                                                               const NativeProfile&,
                                                               const std::vector<CacheCheck>& points) {
      std::lock_guard lk(mu);
      asked.clear();
      std::vector<double> now;
      for (const CacheCheck& c : points) {
        if (!c.optional) asked.push_back(c.point);
        const std::size_t b = c.point.bytes;
        if (!c.optional)
          now.push_back(b == 8 ? at_8 : b == 65536 ? at_64k : at_1m);
        else
          now.push_back(b == 8 ? ring_8 : b == std::size_t{1} << 20 ? tree_1m : -1.0);
      }
      return now;
    });
  };
  const std::vector<AlgorithmPoint> fastest{{"tree", 8}, {"ring", 65536}, {"ring", std::size_t{1} << 20}};
  // Calibrated figures are checked at once, as a cached file is: as fast as
  // measured, they stand (calibrated once per rank)...
  CHECK(tune(2, cfg, slow_spell, timing(100, 2000))[0].outcome.source.find("calibrated at creation") == 0);
  CHECK(calibrations == 2);
  CHECK(asked == fastest);
  // ... under half of it, they are measured once more, and only once.
  {
    TempCache own;
    CHECK(tune(2, cfg, slow_spell, timing(10, 1000))[0].outcome.source.find("calibrated at creation") == 0);
    CHECK(calibrations == 6);
  }
  calibrations = 2;

  // Now as fast as cached, or slower (a slow spell now): the cache serves.
  for (const auto& [a, b] : {std::pair{60.0, 1500.0}, std::pair{300.0, 9000.0}}) {
    const auto again = tune(2, cfg, slow_spell, timing(a, b));
    CHECK(again[0].outcome.source.find("tuning cache ") == 0);
    // The same file on both ranks; each says how long its own check took ("checked in N ms").
    const auto file_of = [](const std::string& source) { return source.substr(0, source.find(" (checked in ")); };
    CHECK(file_of(again[1].outcome.source) == file_of(again[0].outcome.source));
    CHECK(again[1].outcome.source.find(" (checked in ") != std::string::npos);
  }
  CHECK(calibrations == 2);
  CHECK(asked == fastest);

  // Under half the cached time at one point: measured again on every rank, the
  // file replaced (and measured once more: this timer finds the new figures
  // slow as well).
  const auto fresh = tune(2, cfg, slow_spell, timing(60, 900));
  for (const auto& r : fresh) {
    CHECK(r.outcome.source.find("calibrated at creation") == 0);
    CHECK(r.outcome.source.find("ring at 1048576 B took 900.0 us now against 2000.0 us cached") != std::string::npos);
  }
  CHECK(calibrations == 6);
  CHECK(files_in(cache.dir()).size() == 1);

  // The fastest as cached, but tree (optional, timed as suspect) under half its cached time: stale too.
  const auto suspect = tune(2, cfg, slow_spell, timing(100, 2000, 1200));
  for (const auto& r : suspect)
    CHECK(r.outcome.source.find("tree at 1048576 B took 1200.0 us now against 3000.0 us cached") !=
          std::string::npos);
  CHECK(calibrations == 10);

  // Decode's size: ring at 8 B (optional, timed as suspect) under half its cached time: stale.
  const auto small = tune(2, cfg, slow_spell, timing(100, 2000, -1, 4.0, 1.5));
  for (const auto& r : small)
    CHECK(r.outcome.source.find("ring at 8 B took 1.5 us now against 5.0 us cached") != std::string::npos);
  CHECK(calibrations == 14);
}

TEST_CASE("an explicit tuning file is written once and then used as it is") {
  TempCache cache;
  Config cfg;
  cfg.tuning_file = cache.root + "/explicit.json";
  const auto first = tune(2, cfg);
  CHECK(first[0].outcome.source.find("saved to " + cfg.tuning_file) != std::string::npos);
  CHECK(files_in(cache.dir()).empty());  // the cache is not touched
  const auto again = tune(2, cfg);
  CHECK(again[0].outcome.source == "tuning file " + cfg.tuning_file);
  // With calibration off the named file still applies.
  cfg.calibrate = false;
  const auto off = tune(2, cfg);
  CHECK(off[0].outcome.source == "tuning file " + cfg.tuning_file);
  CHECK(off[0].links.at(0, 1).alpha_us == doctest::Approx(first[0].links.at(0, 1).alpha_us).epsilon(1e-5));
  std::remove(cfg.tuning_file.c_str());
}

TEST_CASE("the setup fingerprint names the host and the loaded libraries") {
  const std::string fp = local_fingerprint();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  CHECK(fp.rfind(host, 0) == 0);
  CHECK(fp.find("|comm ") != std::string::npos);
  CHECK(fp.find("|libs /") != std::string::npos);  // libcomm.so, or the executable holding comm
  CHECK(fp.find("|allowed ") != std::string::npos);
}

TEST_CASE("tuning file version 4 keeps the measured curves of comm's own algorithms") {
  TuningExtras ex;
  ex.measured.set(Collective::allreduce, "ring", {{8, 1.5}, {65536, 40.25}});
  ex.measured.set(Collective::allreduce, "mem_oneshot", {{8, 0.3}});
  TuningExtras back = round_trip(ex);
  CHECK(back.native.curves.empty());
  REQUIRE(back.measured.curves.size() == 2);
  CHECK(back.measured.predict(Collective::allreduce, "ring", 65536) == 40.25);
  CHECK(back.measured.predict(Collective::allreduce, "mem_oneshot", 8) == 0.3);
}

TEST_CASE("measured times scale the model: exact at the ladder, log-interpolated between, held beyond") {
  const int n = 4;
  Selector s(n, test::uniform_links(n, LinkKind::shm, 1.0, 5.0), ComputeParams{}, std::size_t{1} << 20, {}, nullptr);
  const Collective ar = Collective::allreduce;
  const double ring4k = s.predict_model(ar, "ring", 4096), ring64k = s.predict_model(ar, "ring", 65536);
  const double direct4k = s.predict_model(ar, "direct", 4096);
  REQUIRE(ring4k > 0);
  REQUIRE(direct4k > 0);
  // Before: the model alone.
  CHECK(s.predict(ar, "ring", 4096) == ring4k);
  // Measured: ring 2x and 3x the model at 4 KiB and 64 KiB; direct 10x slower
  // than the model says at 4 KiB (its only point).
  NativeProfile measured;
  measured.set(ar, "ring", {{4096, 2 * ring4k}, {65536, 3 * ring64k}});
  measured.set(ar, "direct", {{4096, 10 * direct4k}});
  s.set_measured_profile(measured);
  CHECK(s.predict(ar, "ring", 4096) == doctest::Approx(2 * ring4k));
  CHECK(s.predict(ar, "ring", 65536) == doctest::Approx(3 * ring64k));
  // 16 KiB is halfway between 4 KiB and 64 KiB in log size: ratio 2.5.
  CHECK(s.predict(ar, "ring", 16384) == doctest::Approx(2.5 * s.predict_model(ar, "ring", 16384)));
  // Below the first point and beyond the last the nearest ratio holds.
  CHECK(s.predict(ar, "ring", 8) == doctest::Approx(2 * s.predict_model(ar, "ring", 8)));
  CHECK(s.predict(ar, "ring", 64 << 20) == doctest::Approx(3 * s.predict_model(ar, "ring", 64 << 20)));
  CHECK(s.predict(ar, "direct", 64) == doctest::Approx(10 * s.predict_model(ar, "direct", 64)));
  // The choice follows the corrected predictions: the model's pick at 4 KiB,
  // made 100x slower by measurement while another took its model's time, is
  // no longer chosen.
  Selector t(n, test::uniform_links(n, LinkKind::shm, 1.0, 5.0), ComputeParams{}, std::size_t{1} << 20, {}, nullptr);
  const std::string pick = t.choose(ar, 4096);
  const std::string other = pick == "ring" ? "tree" : "ring";
  NativeProfile slow;
  slow.set(ar, pick, {{4096, 100 * t.predict_model(ar, pick, 4096)}});
  slow.set(ar, other, {{4096, t.predict_model(ar, other, 4096)}});
  t.set_measured_profile(slow);
  CHECK(t.choose(ar, 4096) != pick);
}


TEST_CASE("across the cache size measured times are interpolated as a power of the size, not as ratios to the model") {
  const int n = 2;
  ComputeParams compute{};
  compute.cache_bytes = std::size_t{4} << 20;
  compute.copy_large_gbps = compute.copy_gbps / 4;  // the model jumps at the cache size
  compute.reduce_large_gbps = compute.reduce_gbps / 4;
  Selector s(n, test::uniform_links(n, LinkKind::shm, 1.0, 5.0), compute, std::size_t{1} << 20, {}, nullptr);
  const Collective ar = Collective::allreduce;
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const double model1 = s.predict_model(ar, "direct", kMiB), model8 = s.predict_model(ar, "direct", 8 * kMiB);
  const double model4k = s.predict_model(ar, "direct", 4096);
  REQUIRE(model1 > 0);
  // Measured: 1 MiB takes 100 us and 8 MiB 1600 us: 16x for 8x the bytes, a
  // power of 4/3, so 2 MiB lies at 100 * 2^(4/3) and 4 MiB at 100 * 4^(4/3).
  NativeProfile measured;
  measured.set(ar, "direct", {{4096, 2 * model4k}, {kMiB, 100.0}, {8 * kMiB, 1600.0}});
  s.set_measured_profile(measured);
  CHECK(s.predict(ar, "direct", kMiB) == doctest::Approx(100.0));
  CHECK(s.predict(ar, "direct", 8 * kMiB) == doctest::Approx(1600.0));
  CHECK(s.predict(ar, "direct", 2 * kMiB) == doctest::Approx(100.0 * std::pow(2.0, 4.0 / 3)));
  CHECK(s.predict(ar, "direct", 4 * kMiB) == doctest::Approx(100.0 * std::pow(4.0, 4.0 / 3)));
  // Not what the model scaled by an interpolated ratio says there.
  const double f = 1.0 / 3;  // 2 MiB is a third of the way from 1 to 8 MiB in log size
  const double by_ratio = s.predict_model(ar, "direct", 2 * kMiB) *
                          (100.0 / model1 + (1600.0 / model8 - 100.0 / model1) * f);
  CHECK(std::abs(s.predict(ar, "direct", 2 * kMiB) / by_ratio - 1) > 0.05);
  // On one side of the cache size the ratios are interpolated as before.
  const double r4k = 2.0, r1m = 100.0 / model1, g = 0.5;  // 64 KiB: halfway from 4 KiB to 1 MiB in log size
  CHECK(s.predict(ar, "direct", 65536) ==
        doctest::Approx(s.predict_model(ar, "direct", 65536) * (r4k + (r1m - r4k) * g)));
  // Past the last point the last ratio holds.
  CHECK(s.predict(ar, "direct", 32 * kMiB) ==
        doctest::Approx(s.predict_model(ar, "direct", 32 * kMiB) * 1600.0 / model8));
}

TEST_CASE("a calibrating communicator times its own all-reduce algorithms and predicts them from the times") {
  TempCache cache;
  Config cfg;
  cfg.transport = "local";
  cfg.calibration_busy_limit = 1;  // cache even on a busy CI machine
  std::vector<std::vector<CandidateCost>> at64k(2);
  test::run_local(
      2, cfg,
      [&](Communicator& c) {
        at64k[static_cast<std::size_t>(c.rank())] = c.candidates(Collective::allreduce, 65536);
        // Still a working communicator after timing its algorithms.
        std::vector<float> v(1000, static_cast<float>(c.rank() + 1));
        c.allreduce(View{v.data(), v.size(), DataType::f32}, ReduceOp::sum);
        CHECK(v.front() == 3.0f);
      },
      /*calibrate=*/true);
  const auto files = files_in(cache.dir());
  REQUIRE(files.size() == 1);
  LinkMatrix m = nominal(2);
  ComputeParams compute;
  TuningExtras ex;
  REQUIRE(load_tuning(cache.dir() + "/" + files[0], m, compute, &ex));
  // Every ladder size in the caches has at least two algorithms timed
  // (kMinCandidatesInCache); which ones depends on the budget left, so the
  // check takes every algorithm measured at 64 KiB.
  std::map<std::string, double> at_64k;
  for (const NativeCurve& curve : ex.measured.curves) {
    REQUIRE(curve.collective == Collective::allreduce);
    for (const auto& [bytes, us] : curve.points) {
      CHECK(us > 0);
      if (bytes == 65536) at_64k[curve.algorithm] = us;
    }
  }
  REQUIRE(at_64k.size() >= 2);
  // Both ranks predict each at a ladder size as exactly what was measured there.
  for (const auto& cands : at64k) {
    std::size_t found = 0;
    for (const CandidateCost& cc : cands)
      if (const auto it = at_64k.find(cc.algorithm); it != at_64k.end()) {
        ++found;
        CAPTURE(cc.algorithm);
        CHECK(cc.predicted_us == doctest::Approx(it->second).epsilon(1e-6));
      }
    CHECK(found == at_64k.size());
  }
}

namespace {

// A selector (4 ranks over shm unless told) given an all-reduce profile measured
// as multiples of its own model, and what its corrected predictions are in those terms.
// `receiver_copies`: the links' receiver moves the data (shared memory).
LinkMatrix correction_links(int n, LinkKind kind, double alpha_us, double beta_gbps, bool receiver_copies) {
  LinkMatrix links = test::uniform_links(n, kind, alpha_us, beta_gbps);
  for (LinkInfo& l : links.links) l.receiver_copies = receiver_copies && l.kind == kind;
  return links;
}

struct Corrections {
  explicit Corrections(int n = 4, LinkKind kind = LinkKind::shm, double alpha_us = 1.0, double beta_gbps = 5.0,
                       bool receiver_copies = false)
      : s{n, correction_links(n, kind, alpha_us, beta_gbps, receiver_copies), ComputeParams{}, std::size_t{1} << 20,
          {}, nullptr} {}
  Selector s;
  NativeProfile measured;
  double model(const char* a, std::size_t bytes) { return s.predict_model(Collective::allreduce, a, bytes); }
  // `a` took times[i].second x the model at times[i].first bytes.
  void measure(const char* a, const std::vector<std::pair<std::size_t, double>>& times) {
    std::vector<std::pair<std::size_t, double>> us;
    for (const auto& [bytes, x] : times) us.emplace_back(bytes, x * model(a, bytes));
    measured.set(Collective::allreduce, a, us);
  }
  double ratio(const char* a, std::size_t bytes) { return s.predict(Collective::allreduce, a, bytes) / model(a, bytes); }
};

}  // namespace

TEST_CASE("an algorithm not timed at the largest size follows the contenders' median change of ratio there") {
  const std::size_t mib = std::size_t{1} << 20, large = std::size_t{8} << 20;
  Corrections f;
  // ring, rabenseifner and twoshot were contenders at 8 MiB: their ratio went
  // 1 -> 3, 2 -> 4 and 1 -> 1.5 (x3, x2, x1.5); tree was timed only up to 1 MiB, at ratio 1.5.
  f.measure("ring", {{mib, 1}, {large, 3}});
  f.measure("rabenseifner", {{mib, 2}, {large, 4}});
  f.measure("twoshot", {{mib, 1}, {large, 1.5}});
  f.measure("tree", {{mib, 1.5}});
  f.s.set_measured_profile(f.measured);
  CHECK(f.ratio("ring", large) == doctest::Approx(3));
  // The median change is x2: tree's 1.5 becomes 3 at 8 MiB and beyond.
  CHECK(f.ratio("tree", mib) == doctest::Approx(1.5));
  CHECK(f.ratio("tree", large) == doctest::Approx(3));
  CHECK(f.ratio("tree", 4 * large) == doctest::Approx(3));
}

TEST_CASE("an algorithm last timed below the largest sizes follows each size's contenders in turn") {
  // As calibration times past the caches: four contenders at 8 MiB, two of
  // them again at 32 MiB. Tree stopped at 1 MiB (ratio 1.5). From 1 to 8 MiB
  // the contenders changed x3, x2, x1.5 and x1 (median: the upper of the two
  // middle ones, x2); from 8 to 32 MiB the two timed there changed x1.2 and
  // x1.4 (x1.4). Carried straight from 1 to 32 MiB by those two alone (x3.6
  // and x1.4: x3.6) tree would be 1.3x off, as on shm, where the two timed at
  // 32 MiB were direct-memory algorithms whose change from 1 MiB, in cache,
  // put the schedule algorithms at 2-8x their time.
  const std::size_t mib = std::size_t{1} << 20, large = std::size_t{8} << 20, largest = std::size_t{32} << 20;
  Corrections f;
  f.measure("ring", {{mib, 1}, {large, 3}, {largest, 3.6}});
  f.measure("rabenseifner", {{mib, 2}, {large, 4}});
  f.measure("twoshot", {{mib, 1}, {large, 1.5}});
  f.measure("direct", {{mib, 1}, {large, 1}, {largest, 1.4}});
  f.measure("tree", {{mib, 1.5}});
  f.s.set_measured_profile(f.measured);
  CHECK(f.ratio("tree", large) == doctest::Approx(1.5 * 2));
  CHECK(f.ratio("tree", largest) == doctest::Approx(1.5 * 2 * 1.4));
  CHECK(f.ratio("twoshot", largest) == doctest::Approx(1.5 * 1.4));
  CHECK(f.ratio("tree", 2 * largest) == doctest::Approx(1.5 * 2 * 1.4));
}

TEST_CASE("an algorithm not timed at the largest size follows the change of one that moves the data alike") {
  // 2 ranks over loopback TCP: hierarchical is tree on one host and
  // hierarchical_rail is ring. At 8 MiB the half exchangers' ratio grew
  // (ring x1.4, twoshot x1.5, direct x1.3) and tree's barely (x1.1).
  const std::size_t mib = std::size_t{1} << 20, large = std::size_t{8} << 20;
  Corrections f(2, LinkKind::tcp, 10.0, 2.66);
  const auto moves = [&](const char* a) { return f.s.movement(Collective::allreduce, a, {mib, large}); };
  REQUIRE(Selector::moves_alike(moves("tree"), moves("hierarchical")));
  REQUIRE(Selector::moves_alike(moves("ring"), moves("hierarchical_rail")));
  REQUIRE_FALSE(Selector::moves_alike(moves("tree"), moves("twoshot")));
  REQUIRE_FALSE(Selector::moves_alike(moves("tree"), moves("direct")));
  REQUIRE_FALSE(Selector::moves_alike(moves("tree"), moves("ring")));
  f.measure("ring", {{mib, 1}, {large, 1.4}});
  f.measure("twoshot", {{mib, 1}, {large, 1.5}});
  f.measure("direct", {{mib, 1}, {large, 1.3}});
  f.measure("tree", {{mib, 1}, {large, 1.1}});
  f.measure("hierarchical", {{mib, 0.9}});
  f.measure("hierarchical_rail", {{mib, 0.8}});
  f.measure("rabenseifner", {{mib, 1.2}});
  f.s.set_measured_profile(f.measured);
  CHECK(f.ratio("hierarchical", large) == doctest::Approx(0.9 * 1.1));
  CHECK(f.ratio("hierarchical_rail", large) == doctest::Approx(0.8 * 1.4));
  REQUIRE(Selector::moves_alike(moves("rabenseifner"), moves("twoshot")));
  CHECK(f.ratio("rabenseifner", large) == doctest::Approx(1.2 * 1.5));  // not the median change, x1.4
}

TEST_CASE("an algorithm follows its twin straight past a size the twin was not timed at") {
  // ofi shm, 2 ranks: hierarchical (tree on one host) last timed at 1 MiB, a
  // refinement timed others at 2 MiB but not tree, and tree again at 8 MiB.
  const std::size_t mib = std::size_t{1} << 20, two = 2 * mib, large = 8 * mib;
  Corrections f(2, LinkKind::tcp, 10.0, 2.66);
  f.measure("tree", {{mib, 1}, {large, 1.1}});
  f.measure("ring", {{mib, 1}, {large, 1.6}});
  f.measure("twoshot", {{mib, 1}, {two, 1}, {large, 1.3}});
  f.measure("direct", {{mib, 1}, {two, 1}, {large, 1.3}});
  f.measure("hierarchical", {{mib, 1.05}});       // measured as tree did: its twin
  f.measure("hierarchical_rail", {{mib, 0.7}});  // alike ring in the model, not on the clock
  f.s.set_measured_profile(f.measured);
  CHECK(f.ratio("hierarchical", large) == doctest::Approx(1.05 * 1.1));   // stepping through 2 MiB: x1.3
  CHECK(f.ratio("hierarchical_rail", large) == doctest::Approx(0.7 * 1.3));  // not ring's x1.6
}

TEST_CASE("halves cut in chunks move the data otherwise than halves sent whole, though the model calls them as fast") {
  // 2 ranks over shared memory whose receiver copies the data (ofi shm): the
  // model puts ring (each half cut in 1 MiB chunks) and twoshot (each half
  // sent whole) within 0.01 % of each other, and the clock did not from
  // memory: ring took 1.4-1.6x twoshot's time at 32 MiB, 1.0-1.3x at 8 MiB.
  const std::size_t mib = std::size_t{1} << 20, large = 8 * mib, largest = 32 * mib;
  Corrections f(2, LinkKind::shm, 1.0, 5.0, /*receiver_copies=*/true);
  const auto moves = [&](const char* a) { return f.s.movement(Collective::allreduce, a, {mib, large, largest}); };
  const auto ring = moves("ring"), twoshot = moves("twoshot");
  for (std::size_t k = 0; k < ring.us.size(); ++k)
    REQUIRE(std::max(ring.us[k], twoshot.us[k]) <= Selector::kSameMovement * std::min(ring.us[k], twoshot.us[k]));
  CHECK(ring.sends[2] > Selector::kSameCut * twoshot.sends[2]);
  CHECK_FALSE(Selector::moves_alike(ring, twoshot));
  CHECK(Selector::moves_alike(twoshot, moves("rabenseifner")));
  CHECK(Selector::moves_alike(ring, moves("hierarchical_rail")));
  // Halves within one chunk go whole in both.
  CHECK(Selector::moves_alike(f.s.movement(Collective::allreduce, "ring", {mib}),
                              f.s.movement(Collective::allreduce, "twoshot", {mib})));
  // Not timed at 32 MiB, rabenseifner follows twoshot's change there (x1.3),
  // hierarchical_rail ring's (x1.9), though all four measured alike at 8 MiB.
  f.measure("twoshot", {{mib, 1}, {large, 1}, {largest, 1.3}});
  f.measure("ring", {{mib, 1}, {large, 1.05}, {largest, 2.0}});
  f.measure("rabenseifner", {{mib, 1}, {large, 1}});
  f.measure("hierarchical_rail", {{mib, 1}, {large, 1.05}});
  f.measure("direct", {{mib, 2}, {large, 2}, {largest, 2}});
  f.s.set_measured_profile(f.measured);
  CHECK(f.ratio("rabenseifner", largest) == doctest::Approx(1.3));
  CHECK(f.ratio("hierarchical_rail", largest) == doctest::Approx(2.0));
  const std::string picked = f.s.choose(Collective::allreduce, largest);
  CHECK((picked == "twoshot" || picked == "rabenseifner"));

  // With none of its cut timed at 32 MiB, twoshot follows those the model
  // calls alike (ring, x1.9), not the median of all (x1.2).
  Corrections g(2, LinkKind::shm, 1.0, 5.0, /*receiver_copies=*/true);
  g.measure("twoshot", {{mib, 1}, {large, 1}});
  g.measure("ring", {{mib, 1}, {large, 1.05}, {largest, 2.0}});
  g.measure("direct", {{mib, 2}, {large, 2}, {largest, 2 * 1.2}});
  g.measure("tree", {{mib, 1}, {large, 1}, {largest, 1.1}});
  g.s.set_measured_profile(g.measured);
  CHECK(g.ratio("twoshot", largest) == doctest::Approx(2.0 / 1.05));
}

TEST_CASE("between two sizes it was timed at, an algorithm follows the bend its twin measured in between") {
  // shm, 2 ranks: time per byte dips at 512 KiB (in L2) between 64 KiB and 1
  // MiB. twoshot was timed there too, ring only at the two ends.
  const std::size_t k64 = std::size_t{64} << 10, half = std::size_t{512} << 10, mib = std::size_t{1} << 20;
  Corrections f(2, LinkKind::tcp, 10.0, 2.66);
  const auto moves = [&](const char* a) { return f.s.movement(Collective::allreduce, a, {k64, half, mib}); };
  REQUIRE(Selector::moves_alike(moves("ring"), moves("twoshot")));
  REQUIRE_FALSE(Selector::moves_alike(moves("ring"), moves("direct")));
  REQUIRE_FALSE(Selector::moves_alike(moves("tree"), moves("twoshot")));
  f.measure("twoshot", {{k64, 1}, {half, 0.6}, {mib, 1.4}});
  f.measure("direct", {{k64, 1}, {half, 3}, {mib, 1}});  // bends the other way; moves the data otherwise
  f.measure("ring", {{k64, 1.1}, {mib, 1.5}});
  f.measure("tree", {{k64, 1}, {mib, 2}});
  f.s.set_measured_profile(f.measured);
  // 512 KiB lies 3/4 of the way from 64 KiB to 1 MiB in log size: twoshot's
  // straight line gives 1.3 there, it measured 0.6; ring's gives 1.4.
  CHECK(f.ratio("ring", half) == doctest::Approx(1.4 * 0.6 / 1.3));
  CHECK(f.ratio("ring", k64) == doctest::Approx(1.1));  // its own points stay
  CHECK(f.ratio("ring", mib) == doctest::Approx(1.5));
  CHECK(f.ratio("tree", half) == doctest::Approx(1.75));  // no twin timed there: the straight line
  CHECK(f.ratio("twoshot", half) == doctest::Approx(0.6));
}

TEST_CASE("auto picks an extrapolated algorithm only if it is predicted clearly faster than the best measured one") {
  const std::size_t mib = std::size_t{1} << 20, large = std::size_t{8} << 20;
  // Ring is measured at 1 and 8 MiB (at the model there), tree only at 1 MiB:
  // at 8 MiB tree is predicted from ring's change of ratio (x1), so tree's
  // ratio at 1 MiB sets its prediction there against ring's. `share` is
  // tree's predicted time over ring's at 8 MiB.
  const auto hopeless = [&](Corrections& f) {  // every other algorithm, measured at both sizes
    for (const char* a : {"direct", "twoshot", "recursive_doubling", "rabenseifner", "hierarchical", "hierarchical_rail"})
      f.measure(a, {{mib, 1000}, {large, 1000}});
  };
  const auto pick = [&](double share, std::size_t at = std::size_t{8} << 20) {
    Corrections f;
    const double m = f.model("tree", large) / f.model("ring", large);
    f.measure("ring", {{mib, 1}, {large, 1}});
    f.measure("tree", {{mib, share / m}});
    hopeless(f);
    f.s.set_measured_profile(f.measured);
    CHECK(f.s.predict(Collective::allreduce, "tree", large) ==
          doctest::Approx(share * f.s.predict(Collective::allreduce, "ring", large)));
    if (at != large) {  // beyond every measured size: ring was measured at the largest, tree was not
      const double tree = f.s.predict(Collective::allreduce, "tree", at);
      const double ring = f.s.predict(Collective::allreduce, "ring", at);
      REQUIRE(tree < ring);
      REQUIRE(tree * Selector::kExtrapolatedMargin > ring);
    }
    return f.s.choose(Collective::allreduce, at);
  };
  CHECK(pick(0.5) == "tree");  // more than the margin faster
  CHECK(pick(1.0 / Selector::kExtrapolatedMargin + 0.05) == "ring");  // faster, by less than the margin
  CHECK(pick(0.95) == "ring");
  CHECK(pick(2.0) == "ring");
  CHECK(pick(0.9, 4 * large) == "ring");  // ring measured at 8 MiB counts as measured beyond it
  // Where both were measured the faster prediction wins, however close; so
  // it does beyond the largest size measured, if both were measured there.
  Corrections f;
  f.measure("ring", {{mib, 1}, {large, 1}});
  f.measure("tree", {{mib, 0.95 * f.model("ring", mib) / f.model("tree", mib)},
                     {large, 0.95 * f.model("ring", large) / f.model("tree", large)}});
  hopeless(f);
  f.s.set_measured_profile(f.measured);
  CHECK(f.s.choose(Collective::allreduce, mib) == "tree");
  CHECK(f.s.choose(Collective::allreduce, large) == "tree");
  const std::size_t beyond = 8 * large;
  if (f.s.predict(Collective::allreduce, "tree", beyond) < f.s.predict(Collective::allreduce, "ring", beyond))
    CHECK(f.s.choose(Collective::allreduce, beyond) == "tree");
  else
    CHECK(f.s.choose(Collective::allreduce, beyond) == "ring");
}

TEST_CASE("an algorithm not timed at the smallest size follows the change of ratio of those timed there") {
  // More ranks than cores: the algorithms timed at 8 B took 30x and 40x the
  // model there and 3x and 4x at 64 KiB; 'direct', judged hopeless at 8 B
  // and timed from 64 KiB on at 2x, must not keep 2x at 8 B (it would win
  // there on the model's optimism alone).
  const std::size_t tiny = 8, mid = std::size_t{64} << 10;
  Corrections f;
  f.measure("ring", {{tiny, 30}, {mid, 3}});
  f.measure("tree", {{tiny, 40}, {mid, 4}});
  f.measure("direct", {{mid, 2}});
  f.s.set_measured_profile(f.measured);
  CHECK(f.ratio("ring", tiny) == doctest::Approx(30));
  CHECK(f.ratio("direct", mid) == doctest::Approx(2));
  // Both changes are x10: direct's 2x becomes 20x at 8 B and below.
  CHECK(f.ratio("direct", tiny) == doctest::Approx(20));
  CHECK(f.ratio("direct", 1) == doctest::Approx(20));
}

TEST_CASE("an algorithm never timed is off by what was typical where the others were timed") {
  // 4 ranks on 2 cores: what calibration timed at 8 B took 30x, 40x and 50x
  // the model; 'direct', never timed, must not be trusted at the model's
  // figure there (it would win on the model's optimism alone).
  const std::size_t tiny = 8, mid = std::size_t{64} << 10;
  Corrections f;
  f.measure("recursive_doubling", {{tiny, 30}});
  f.measure("ring", {{tiny, 40}, {mid, 3}});
  f.measure("tree", {{tiny, 50}, {mid, 5}});
  f.s.set_measured_profile(f.measured);
  // The median of 30, 40, 50 at 8 B; of 3 and 5 (in log terms: sqrt(15)) at 64 KiB.
  CHECK(f.ratio("direct", tiny) == doctest::Approx(40));
  CHECK(f.ratio("direct", mid) == doctest::Approx(std::sqrt(15.0)));
  CHECK(f.ratio("rabenseifner", mid) == doctest::Approx(std::sqrt(15.0)));
  // Those timed keep their own.
  CHECK(f.ratio("ring", tiny) == doctest::Approx(40));
  CHECK(f.ratio("tree", mid) == doctest::Approx(5));
  // Nothing measured for a collective: the model alone.
  CHECK(f.s.predict(Collective::broadcast, "tree", mid) == f.s.predict_model(Collective::broadcast, "tree", mid));
}

TEST_CASE("a selector that replaces another takes its names: views of them stay valid, at the same addresses") {
  const auto make = [](bool schedules) {
    return std::make_unique<Selector>(4, test::uniform_links(4, LinkKind::shm, 1.0, 5.0), ComputeParams{},
                                      std::size_t{1} << 20, std::vector<OverrideRule>{}, nullptr, schedules);
  };
  auto first = make(true);
  const std::string_view chosen = first->choose(Collective::allreduce, 8);  // as an operation keeps it
  const std::string copy(chosen);
  auto second = make(true);
  second->share_names(first->name_lists());
  first.reset();
  CHECK(chosen == copy);  // read after the first selector is gone (ASan: no use after free)
  const auto& names = second->names(Collective::allreduce);
  CHECK(std::count_if(names.begin(), names.end(), [&](const std::string& n) { return n.data() == chosen.data(); }) ==
        1);
  CHECK(second->choose(Collective::allreduce, 8).data() == chosen.data());
  // Another set of algorithms is not the same names.
  auto other = make(false);
  CHECK_THROWS_AS(other->share_names(second->name_lists()), Error);
}
