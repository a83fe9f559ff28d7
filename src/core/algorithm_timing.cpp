// Start-up timing of comm's own all-reduce algorithms (select/tuning.hpp
// AlgorithmTimer): each schedule and direct-memory algorithm at a ladder of
// sizes, run through the engine that will run it for the user, every rank at
// once, each iteration between barriers. The slowest rank's median per point
// scales the cost model's prediction (Selector::set_measured_profile), so
// automatic selection compares algorithms on what they cost here, with the
// model's shape between and beyond the points.

#include "core/communicator_impl.hpp"
#include "select/calibration_measure.hpp"
#include "util/log.hpp"

#include <algorithm>
#include <array>
#include <limits>

namespace comm::detail {
namespace {

// Powers of two, like the native ladder: the selector evaluates each size
// bucket at 2^b. Beyond the last point the model's shape carries the ratio.
// The last size is past the caches (data streams from memory, where the
// model's large-data rates are least sure): only the algorithms that timed
// close to the fastest at the size before are timed there, at most three,
// and only where one round of them fits the size's budget.
constexpr std::size_t kLadder[] = {8, 4096, 65536, std::size_t{1} << 20, std::size_t{8} << 20};
constexpr double kContenderWithin = 1.5;
constexpr std::size_t kMaxContenders = 3;
// Timed rounds per size: at least kMinRounds, then more while the size's
// time stays within the budget on every rank (agreed before each round), at
// most kMaxRounds. Warm-up rounds come first and are not counted.
constexpr double kBudgetPerSizeUs = 20000;
constexpr int kMinRounds = 3, kMaxRounds = 9;
constexpr int kMinRoundsLast = 2;  // the largest size: a few contenders, each costly
int warmup_for(double predicted_round_us) { return predicted_round_us > 2000 ? 1 : 2; }
// An algorithm the model puts this many times behind the fastest is not timed
// at that size (it will not be chosen there): creation stays short. Where one
// round of every candidate would exceed the size's budget, only those within
// kHopelessWhenSlow of the fastest are timed.
constexpr double kHopeless = 4.0;
constexpr double kHopelessWhenSlow = 2.0;

// One timed (algorithm, size): where its iterations sit in the times vector.
struct Point {
  std::size_t algorithm;
  std::size_t bytes;
  std::size_t first;
  int iterations;
};

// The algorithms worth timing at `bytes` (indices into `names`) and the model's
// time of one round of them.
struct Candidates {
  std::vector<std::size_t> indices;
  double round_us = 0;
};

// `so_far`: the times measured at the smaller sizes; for the last size only
// algorithms measured at the one before count, their model scaled by what
// they measured there.
Candidates worth_timing(const Selector& selector, const std::vector<std::string>& names, std::size_t bytes,
                        const NativeProfile& so_far) {
  const bool last = bytes == kLadder[std::size(kLadder) - 1];
  const std::size_t before = kLadder[std::size(kLadder) - 2];
  double best = std::numeric_limits<double>::infinity();
  std::vector<double> predicted(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    predicted[i] = selector.predict_model(Collective::allreduce, names[i], bytes);
    if (last && predicted[i] >= 0) {
      const NativeCurve* curve = so_far.find(Collective::allreduce, names[i]);
      const double model_before = selector.predict_model(Collective::allreduce, names[i], before);
      const bool timed = curve && curve->points.back().first == before && model_before > 0;
      predicted[i] = timed ? predicted[i] * curve->points.back().second / model_before : -1.0;
    }
    if (predicted[i] >= 0) best = std::min(best, predicted[i]);
  }
  Candidates c;
  const std::array<double, 2> limits = last ? std::array<double, 2>{kContenderWithin, kContenderWithin}
                                            : std::array<double, 2>{kHopeless, kHopelessWhenSlow};
  for (const double limit : limits) {
    c = {};
    for (std::size_t i = 0; i < names.size(); ++i)
      if (predicted[i] >= 0 && predicted[i] <= limit * best) {
        c.indices.push_back(i);
        c.round_us += predicted[i];
      }
    if (c.round_us <= kBudgetPerSizeUs) break;
  }
  if (last && c.indices.size() > kMaxContenders) {  // the fastest few by the scaled model
    std::sort(c.indices.begin(), c.indices.end(),
              [&](std::size_t a, std::size_t b) { return predicted[a] < predicted[b]; });
    c.indices.resize(kMaxContenders);
    c.round_us = 0;
    for (const std::size_t i : c.indices) c.round_us += predicted[i];
  }
  // Past the caches only where it is cheap (memory inside a host): over a
  // network a round of 8 MiB messages would take most of creation's budget.
  if (last && c.round_us > kBudgetPerSizeUs) c = {};
  return c;
}

// Adds the median of each point's iterations to `profile`.
void add_medians(NativeProfile& profile, const std::vector<std::string>& names, const std::vector<Point>& points,
                 const std::vector<double>& times) {
  for (const Point& p : points) {
    const auto from = times.begin() + static_cast<std::ptrdiff_t>(p.first);
    const double median = calib::robust_median(std::vector<double>(from, from + p.iterations));
    const NativeCurve* had = profile.find(Collective::allreduce, names[p.algorithm]);
    std::vector<std::pair<std::size_t, double>> curve = had ? had->points : decltype(curve){};
    curve.emplace_back(p.bytes, median);
    profile.set(Collective::allreduce, names[p.algorithm], std::move(curve));
  }
}

}  // namespace

std::vector<std::vector<double>> CommunicatorImpl::time_rounds(const std::vector<std::string>& names,
                                                               std::vector<std::size_t>& candidates, Call& call,
                                                               int warmup, int min_rounds, int& iterations) {
  CallOptions options;
  call.options = &options;
  iterations = 0;
  std::vector<std::vector<double>> mine(names.size());
  const auto began = calib::Clock::now();
  for (int k = 0; k < warmup + kMaxRounds; ++k) {
    // Every rank says whether its budget is spent; the sum is the same everywhere.
    std::int32_t over = calib::micros(calib::Clock::now() - began) > kBudgetPerSizeUs ? 1 : 0;
    wait(*run_internal(Collective::allreduce, &over, &over, 1, DataType::i32));
    if (over > 0 && iterations >= min_rounds) break;
    if (k >= warmup) ++iterations;
    for (std::size_t& i : candidates) {
      if (i == names.size()) continue;  // refused at this size
      options.algorithm = names[i];
      try {
        wait(*run_internal(Collective::barrier, nullptr, nullptr, 0, DataType::f32));
        const auto t0 = calib::Clock::now();
        wait(*start(call));
        if (k >= warmup) mine[i].push_back(calib::micros(calib::Clock::now() - t0));
      } catch (const Error& e) {
        // Refused alike on every rank before anything moved (not eligible at this size).
        if (!e.is_usage()) throw;
        mine[i].clear();
        i = names.size();
      }
    }
  }
  call.options = nullptr;
  COMM_DEBUG("calibration: all-reduce of " << call.in_bytes << " B: " << candidates.size() << " algorithms x "
                                          << warmup << " + " << iterations << " rounds in "
                                          << calib::micros(calib::Clock::now() - began) / 1000 << " ms");
  return mine;
}

NativeProfile CommunicatorImpl::time_algorithms() {
  const auto began = calib::Clock::now();
  std::vector<std::string> names;
  for (const std::string& n : selector_->names(Collective::allreduce))
    if (!selector_->is_native(Collective::allreduce, n)) names.push_back(n);
  const std::size_t max_count = kLadder[std::size(kLadder) - 1] / sizeof(float);
  std::vector<float> in(max_count, 1.0f), out(max_count, 0.0f);
  NativeProfile profile;
  std::size_t timed = 0;
  Call call;
  call.collective = Collective::allreduce;
  call.input = in.data();
  call.output = out.data();
  call.internal = true;
  for (const std::size_t bytes : kLadder) {
    call.count = bytes / sizeof(float);
    call.in_bytes = call.out_bytes = bytes;
    // The candidates at this size are timed in turns (one iteration of each,
    // then the next round), so that a burst of load elsewhere on the machine
    // hits them alike instead of one algorithm's whole measurement.
    Candidates c = worth_timing(*selector_, names, bytes, profile);
    if (c.indices.empty()) continue;
    int iterations = 0;
    const bool last = bytes == kLadder[std::size(kLadder) - 1];
    const auto mine =
        time_rounds(names, c.indices, call, warmup_for(c.round_us), last ? kMinRoundsLast : kMinRounds, iterations);
    std::vector<Point> points;
    std::vector<double> times;
    for (const std::size_t i : c.indices) {
      if (i == names.size()) continue;
      points.push_back({i, bytes, times.size(), iterations});
      times.insert(times.end(), mine[i].begin(), mine[i].end());
    }
    slowest_rank(times);
    add_medians(profile, names, points, times);
    timed += points.size();
  }
  if (rank_ == 0)
    COMM_INFO("calibration: timed " << timed << " (algorithm, size) points of " << profile.curves.size()
                                    << " all-reduce algorithms in "
                                    << static_cast<long>(calib::micros(calib::Clock::now() - began) / 1000) << " ms");
  return profile;
}

// Every iteration's time becomes the slowest rank's, in one exchange.
void CommunicatorImpl::slowest_rank(std::vector<double>& times) {
  if (times.empty()) return;  // alike on every rank: the same points were timed
  const CallOptions defaults;
  Call max;
  max.collective = Collective::allreduce;
  max.input = max.output = times.data();
  max.count = times.size();
  max.in_bytes = max.out_bytes = times.size() * sizeof(double);
  max.dtype = DataType::f64;
  max.op = ReduceOp::max;
  max.options = &defaults;
  max.internal = true;
  wait(*start(max));
}

}  // namespace comm::detail
