// Start-up timing of a transport's own collectives (see tuning.hpp).

#include "select/calibration_measure.hpp"
#include "select/tuning.hpp"
#include "util/log.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <limits>
#include <sstream>
#include <vector>

namespace comm {
namespace {

// Powers of two: the selector evaluates each size bucket at 2^b, and the
// curve is exact at these. Beyond 4 MiB the curve continues the 1-4 MiB
// segment's time per byte (see NativeProfile::predict).
constexpr std::size_t kNativeLadder[] = {8, 4096, 65536, std::size_t{1} << 20, std::size_t{4} << 20};
// Fewer of the slow large ones: calibration must stay a small part of creation.
int warmup_for(std::size_t bytes) { return bytes >= (std::size_t{1} << 20) ? 1 : 2; }
int iterations_for(std::size_t bytes) {
  return bytes >= (std::size_t{4} << 20) ? 3 : bytes >= (std::size_t{1} << 20) ? 4 : 6;
}

void run_barrier(NativeCollectives& native, bool has_barrier, std::chrono::milliseconds timeout) {
  if (!has_barrier) return;
  CollectiveArgs b;
  b.collective = Collective::barrier;
  b.timeout = timeout;
  native.run(b, "native");
}

// This rank's time of every timed call of `algorithm`, ladder size after
// ladder size (iterations_for(bytes) calls each, the same on every rank).
std::vector<double> time_algorithm(NativeCollectives& native, const std::string& algorithm, bool has_barrier,
                                   std::vector<float>& in, std::vector<float>& out,
                                   std::chrono::milliseconds timeout) {
  std::vector<double> times;
  for (const std::size_t bytes : kNativeLadder) {
    CollectiveArgs a;
    a.collective = Collective::allreduce;
    a.send = in.data();
    a.recv = out.data();
    a.count = std::max<std::size_t>(1, bytes / sizeof(float));
    a.timeout = timeout;
    const int warmup = warmup_for(bytes);
    for (int i = 0; i < warmup + iterations_for(bytes); ++i) {
      run_barrier(native, has_barrier, timeout);
      const auto t0 = calib::Clock::now();
      native.run(a, algorithm);
      if (i >= warmup) times.push_back(calib::micros(calib::Clock::now() - t0));
    }
  }
  return times;
}

}  // namespace

NativeProfile calibrate_native(NativeCollectives& native, Store& store, int rank, int size,
                               std::chrono::milliseconds timeout) {
  NativeProfile profile;
  const auto barriers = native.algorithms(Collective::barrier);
  const bool has_barrier = std::find(barriers.begin(), barriers.end(), "native") != barriers.end();
  const std::size_t max_count = kNativeLadder[std::size(kNativeLadder) - 1] / sizeof(float);
  std::vector<float> in(max_count, 1.0f), out(max_count, 0.0f);
  for (const std::string& algorithm : native.algorithms(Collective::allreduce)) {
    CollectiveArgs probe;
    probe.collective = Collective::allreduce;
    probe.count = max_count;
    // Identical on every rank: the same arguments, the same transport.
    if (!native.supports(probe, algorithm, nullptr)) continue;
    const std::vector<double> mine = time_algorithm(native, algorithm, has_barrier, in, out, timeout);
    const std::string key = "calibration/native/allreduce/" + algorithm + "/";
    store.set(key + std::to_string(rank), calib::encode(mine));
    // Each call's time is the slowest rank's, as for comm's own algorithms
    // (core/algorithm_timing.cpp) and in comm-bench; then the median per
    // size. The slowest of the ranks' medians instead put Gloo's allreduce at
    // 8 B-2 KiB at 122-145 us while comm-bench measured 140-276 us, and auto
    // picked it at 1.5-2x recursive doubling.
    std::vector<double> slowest(mine.size(), 0.0);
    for (int r = 0; r < size; ++r) {
      const std::string k = key + std::to_string(r);
      const std::vector<double> v = calib::decode(store.get(k, timeout), k, mine.size());
      for (std::size_t i = 0; i < v.size(); ++i) slowest[i] = std::max(slowest[i], v[i]);
    }
    std::vector<std::pair<std::size_t, double>> points;
    std::ostringstream text;
    auto from = slowest.begin();
    for (const std::size_t bytes : kNativeLadder) {
      const auto to = from + iterations_for(bytes);
      const double median = calib::robust_median(std::vector<double>(from, to));
      from = to;
      points.emplace_back(bytes, median);
      text << (points.size() > 1 ? ", " : "") << bytes << " B " << median << " us";
    }
    profile.set(Collective::allreduce, algorithm, std::move(points));
    COMM_INFO("calibration: allreduce '" << algorithm << "' (the transport's own): " << text.str());
  }
  return profile;
}

}  // namespace comm
