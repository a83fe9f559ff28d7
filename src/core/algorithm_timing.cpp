// Start-up timing of comm's own all-reduce algorithms (select/tuning.hpp
// AlgorithmTimer): each schedule and direct-memory algorithm at a ladder of
// sizes, run through the engine that will run it for the user, every rank at
// once, each iteration between barriers. The slowest rank's median per point
// scales the cost model's prediction (Selector::set_measured_profile), so
// automatic selection compares algorithms on what they cost here, with the
// model's shape between and beyond the points.

#include "core/communicator_impl.hpp"
#include "engine/direct/direct_engine.hpp"
#include "select/calibration_measure.hpp"
#include "select/timing_plan.hpp"
#include "select/tuning.hpp"
#include "util/carryover_order.hpp"
#include "util/log.hpp"

#include <algorithm>
#include <array>
#include <map>

namespace comm::detail {
namespace {

// One timed (algorithm, size): where its iterations sit in the times vector.
struct Point {
  std::size_t algorithm;
  std::size_t bytes;
  std::size_t first;
  int iterations;
};

// A point's time: the median of its iterations in `times`.
double point_time(const Point& p, const std::vector<double>& times) {
  const auto from = times.begin() + static_cast<std::ptrdiff_t>(p.first);
  return calib::robust_median(std::vector<double>(from, from + p.iterations));
}

// Adds each point's time (point_time) to `profile`, in place of a time
// measured earlier at the same size.
void add_point_times(NativeProfile& profile, const std::vector<std::string>& names, const std::vector<Point>& points,
                     const std::vector<double>& times) {
  for (const Point& p : points) {
    const double us = point_time(p, times);
    const NativeCurve* had = profile.find(Collective::allreduce, names[p.algorithm]);
    std::vector<std::pair<std::size_t, double>> curve = had ? had->points : decltype(curve){};
    std::erase_if(curve, [&](const auto& point) { return point.first == p.bytes; });
    curve.emplace_back(p.bytes, us);
    profile.set(Collective::allreduce, names[p.algorithm], std::move(curve));
  }
}

// The points timed at one size (candidates refused there are left out) and
// their times, in one vector for the exchange that makes them the slowest rank's.
void collect(const std::vector<std::size_t>& candidates, std::size_t refused, std::size_t bytes,
             const std::vector<std::vector<double>>& mine, int iterations, std::vector<Point>& points,
             std::vector<double>& times) {
  for (const std::size_t i : candidates) {
    if (i == refused) continue;
    points.push_back({i, bytes, times.size(), iterations});
    times.insert(times.end(), mine[i].begin(), mine[i].end());
  }
}

// comm's own all-reduce algorithms (the native ones are timed by calibrate_native).
std::vector<std::string> own_algorithms(const Selector& selector) {
  std::vector<std::string> names;
  for (const std::string& n : selector.names(Collective::allreduce))
    if (!selector.is_native(Collective::allreduce, n)) names.push_back(n);
  return names;
}

// An internal all-reduce of floats between `in` and `out`; count and bytes are set per size.
Call timing_call(const float* in, float* out) {
  Call call;
  call.collective = Collective::allreduce;
  call.input = in;
  call.output = out;
  call.internal = true;
  return call;
}

// Sizes `call` to `bytes`, its input in lane 0 of the calibration's scratch
// memory and its output in lane 1: the same addresses at every size, their
// pages faulted as the sizes grow (the last size is timed only where its
// round fits the budget).
static_assert(kLargestTimed <= calib::Scratch::kLaneBytes, "the largest size timed must fit a scratch lane");
void fit_timing_buffers(calib::Scratch& scratch, std::size_t bytes, Call& call) {
  call.count = bytes / sizeof(float);
  call.input = scratch.floats(0, call.count);
  call.output = scratch.floats(1, call.count);
  call.in_bytes = call.out_bytes = bytes;
}

// Rank 0's one line on what time_algorithms timed, how long it took and what it might spend.
void log_timed(std::size_t points, std::size_t algorithms, calib::Clock::time_point began, double budget_us) {
  COMM_INFO("calibration: timed " << points << " (algorithm, size) points of " << algorithms
                                  << " all-reduce algorithms in "
                                  << static_cast<long>(calib::micros(calib::Clock::now() - began) / 1000)
                                  << " ms (budget " << static_cast<long>(budget_us / 1000) << " ms)");
}

}  // namespace

std::vector<std::vector<double>> CommunicatorImpl::time_rounds(const std::vector<std::string>& names,
                                                               std::vector<std::size_t>& candidates, Call& call,
                                                               int warmup, int min_rounds, double budget_us,
                                                               int& iterations) {
  CallOptions options;
  call.options = &options;
  iterations = 0;
  std::vector<std::vector<double>> mine(names.size());
  const std::size_t cache_bytes = selector_->compute().cache_bytes;
  const int timed_per_turn = timed_calls_per_turn(call.in_bytes);
  // The windows as back-to-back calls leave them, once for the size, or
  // before every direct-memory turn where they leave the caches (below).
  if (!touch_windows_per_turn(call.in_bytes, cache_bytes)) quiesce_windows();
  const auto began = calib::Clock::now();
  for (int k = 0; k < warmup + kMaxCheapRounds; ++k) {
    // Every rank says whether its budget is spent and whether the size is
    // past cheap; the sums are the same everywhere.
    const double took_us = calib::micros(calib::Clock::now() - began);
    std::array<std::int32_t, 2> over{took_us > budget_us ? 1 : 0, took_us > kCheapSizeUs ? 1 : 0};
    wait(*run_internal(Collective::allreduce, over.data(), over.data(), over.size(), DataType::i32));
    if (over[0] > 0 && iterations >= min_rounds * timed_per_turn) break;
    if (over[1] > 0 && iterations >= kMaxTimedRounds * timed_per_turn) break;
    if (k >= warmup) iterations += timed_per_turn;
    // In an order that changes every round, so that no candidate always
    // follows the same one (util/carryover_order.hpp).
    for (std::size_t j = 0; j < candidates.size(); ++j) {
      std::size_t& i = candidates[util::carryover_order(candidates.size(), static_cast<std::size_t>(k), j)];
      if (i == names.size()) continue;  // refused at this size
      options.algorithm = names[i];
      try {
        // In cache, an algorithm's time depends on where its last calls left
        // the lines it touches (which rank holds them, in what state; for a
        // direct-memory algorithm also where its window data went): after
        // another algorithm's call it is not what the user's back-to-back
        // calls see. So each candidate's turn is a short burst: untimed calls
        // (warm_calls_per_turn), then timed ones (timed_calls_per_turn), back
        // to back. Single timed calls, each after one untimed one, measured
        // mem_twoshot at 1 MiB on shm at 144 us and 515 us (two phases of this
        // VM) against 63 and 108 us back to back. A direct-memory algorithm's
        // data moves through the whole window, a call at a time
        // (DirectEngine::place_data), and back to back the whole window sits
        // in the caches; after the other candidates' turns it does not, and
        // two calls do not bring it back: in cache from kQuiesceTurnsFrom its
        // turn starts with the windows touched again (past the cache a call's
        // own data goes through the window).
        if (touch_windows_per_turn(call.in_bytes, cache_bytes) && selector_->is_direct(Collective::allreduce, names[i]))
          quiesce_windows();
        // A warm-up round's turn is one call: what it is for (connections,
        // registrations, first touches of the size) happens in the first,
        // and a timed turn starts with its own untimed calls.
        for (int w = k < warmup ? 0 : warm_calls_per_turn(call.in_bytes, cache_bytes); w > 0; --w)
          wait(*start(call));
        for (int t = 0; t < (k < warmup ? 1 : timed_per_turn); ++t) {
          wait(*run_internal(Collective::barrier, nullptr, nullptr, 0, DataType::f32));
          const auto t0 = calib::Clock::now();
          wait(*start(call));
          if (k >= warmup) mine[i].push_back(calib::micros(calib::Clock::now() - t0));
        }
      } catch (const Error& e) {
        // Refused alike on every rank before anything moved (not eligible at this size).
        if (!e.is_usage()) throw;
        mine[i].clear();
        i = names.size();
      }
    }
  }
  call.options = nullptr;
  std::string timed;
  for (const std::size_t i : candidates)
    if (i < names.size()) timed += " " + names[i];
  COMM_DEBUG("calibration: all-reduce of " << call.in_bytes << " B:" << timed << " x " << warmup
                                          << " warm-up rounds + " << iterations << " timed calls in "
                                          << calib::micros(calib::Clock::now() - began) / 1000 << " ms");
  return mine;
}

// The ladder first (select/timing_plan.hpp), then what is optional while the
// budget lasts: challengers at each rung, then refinements where the fastest
// changes between neighbouring sizes, halving the gap. Past the caches the
// rungs keep their own round budgets (worth_timing) and only the cap on the
// whole calibration (kCalibrationCapUs): there the model's from-memory rates
// mislead most, and when the budget dropped them auto picked 1.18-1.39x the
// best from 8 MiB on (ofi shm, shm, UCX tcp). Every decision uses only what
// every rank agreed on (the slowest rank's medians, elapsed and spent
// times), so every rank times alike.
NativeProfile CommunicatorImpl::time_algorithms(double calibration_elapsed_us, calib::Scratch& scratch,
                                                NativeProfile& native) {
  const auto began = calib::Clock::now();
  const auto [elapsed_before_us, sync_us] = timing_start(calibration_elapsed_us);  // alike on every rank
  const double budget_us = algorithm_timing_budget_us(elapsed_before_us);
  double spent_us = 0;  // by the slowest rank's clock: the same on every rank
  const std::size_t cache_bytes = selector_->compute().cache_bytes;
  const std::vector<std::string> names = own_algorithms(*selector_);
  NativeProfile profile;
  std::size_t timed = 0;
  Call call = timing_call(nullptr, nullptr);  // fit_timing_buffers places its buffers
  const auto budget_left = [&] { return budget_us - spent_us; };
  const auto affordable = [&] { return std::max(budget_left(), kAlwaysAffordableUs); };
  // Times `c` at `bytes` and adds the point times to the profile; returns the
  // time it took by the slowest rank's clock, the same figure on every rank.
  const auto time_size = [&](std::size_t bytes, TimingCandidates c, int min_rounds, double size_budget_us) {
    fit_timing_buffers(scratch, bytes, call);
    int iterations = 0;  // in turns (time_rounds), so that a burst of load elsewhere hits them alike
    const auto size_began = calib::Clock::now();
    const auto mine = time_rounds(names, c.indices, call, c.warmup_rounds(), min_rounds,
                                  std::min(size_budget_us, budget_left()), iterations);
    std::vector<Point> points;
    std::vector<double> times;
    collect(c.indices, names.size(), bytes, mine, iterations, points, times);
    // What the size took, barriers and untimed calls included, goes with the
    // times into the exchange: the slowest rank's figure, the same on every rank.
    const double spent = slowest_rank_took(times, size_began);
    add_point_times(profile, names, points, times);
    timed += points.size();
    spent_us += spent;
    return spent;
  };
  // Times what the corrected model now puts fastest at `bytes` if that was
  // not timed there (select/timing_plan.hpp challenger_at); the same on every
  // rank, as the profile is. Returns the time it took.
  const auto time_challengers = [&](std::size_t bytes) {
    double spent = 0;
    for (int k = 0; k < kMaxChallengers; ++k) {
      selector_->set_measured_profile(profile);
      TimingCandidates c = challenger_at(*selector_, names, bytes, profile);
      fit_to_budget(c, {bytes, cache_bytes, kMinTimedRounds, sync_us}, affordable());
      if (c.indices.size() < 2) break;  // a challenger is timed beside its opponent or not at all
      spent += time_size(bytes, std::move(c), kMinTimedRounds, kRefinementBudgetPerSizeUs);
    }
    return spent;
  };
  std::vector<std::size_t> sizes;  // those timed, increasing
  for (const std::size_t bytes : kTimingLadder) {
    TimingCandidates c = worth_timing(*selector_, names, bytes, profile);
    const bool in_cache = bytes < kContendersFrom;
    const int min_rounds = in_cache ? kMinTimedRounds : kMinTimedRoundsLast;
    const TimingCost cost{bytes, cache_bytes, min_rounds, sync_us, c.warmup_rounds()};
    if (in_cache) fit_to_budget(c, cost, budget_left(), kMinCandidatesInCache);
    else cap_past_caches(c, cost, elapsed_before_us + spent_us, budget_left());
    if (c.indices.empty()) continue;
    time_size(bytes, std::move(c), min_rounds, kTimingBudgetPerSizeUs);
    sizes.push_back(bytes);
  }
  spent_us += time_native_choice(kLargestTimed, native, profile, scratch, elapsed_before_us + spent_us);
  for (const std::size_t bytes : sizes)
    if (bytes < kLargestTimed) time_challengers(bytes);  // at the last size a challenger costs tens of ms
  double refinement_us = 0;
  for (std::size_t k = 0; k + 1 < sizes.size();) {
    selector_->set_measured_profile(profile);
    const Refinement r = refinement_between(*selector_, names, sizes[k], sizes[k + 1], profile);
    const double cost = TimingCost{r.bytes, cache_bytes, kMinTimedRounds, sync_us}.of(r.candidates);
    if (r.bytes == 0 || refinement_us + cost > kRefinementBudgetUs || cost > affordable()) {
      ++k;
      continue;
    }
    refinement_us += time_size(r.bytes, r.candidates, kMinTimedRounds, kRefinementBudgetPerSizeUs);
    refinement_us += time_challengers(r.bytes);
    sizes.insert(sizes.begin() + static_cast<std::ptrdiff_t>(k + 1), r.bytes);  // then (lo, mid), then (mid, hi)
  }
  if (rank_ == 0) log_timed(timed, profile.curves.size(), began, budget_us);
  return profile;
}

// The transport's own algorithms are calibrated up to 4 MiB
// (calibration_native.cpp), and beyond the curve continues its last
// segment's time per byte. Gloo's native_bcube took 3.8-4.0 ms at 8 MiB, as
// that predicts, but 24-28.5 at 32 MiB, predicted at 14-18: auto picked it
// at 32-64 MiB at 1.5-1.8x the best in 3 of 6 runs (selection-check). A call
// there takes tens of milliseconds, so only the one that would be chosen is
// timed, once.
double CommunicatorImpl::time_native_choice(std::size_t bytes, NativeProfile& native, const NativeProfile& measured,
                                            calib::Scratch& scratch, double so_far_us) {
  double spent_us = 0;
  selector_->set_measured_profile(measured);  // set_native_profile, below, keeps it
  for (std::size_t k = 0; k < native.curves.size(); ++k) {  // each at most once: its curve then reaches `bytes`
    const std::string pick = selector_->choose(Collective::allreduce, bytes);
    const NativeCurve* curve = native.find(Collective::allreduce, pick);
    if (!curve || curve->points.empty() || curve->points.back().first >= bytes) break;
    const double estimate_us = selector_->predict(Collective::allreduce, pick, bytes);
    const auto chosen = [&] {
      return "calibration: allreduce '" + pick + "' (the transport's own), chosen at " + std::to_string(bytes) +
             " B by its curve's extension (" + std::to_string(estimate_us) + " us)";
    };
    if (so_far_us + spent_us + 2 * estimate_us > kCalibrationCapUs) {
      if (rank_ == 0)
        COMM_INFO(chosen() << ", not timed there: calibration at " << (so_far_us + spent_us) / 1000
                           << " of at most " << kCalibrationCapUs / 1000 << " ms");
      break;
    }
    Call call = timing_call(nullptr, nullptr);
    fit_timing_buffers(scratch, bytes, call);
    const std::vector<std::string> names{pick};
    std::vector<std::size_t> candidates{0};
    int iterations = 0;
    const auto began = calib::Clock::now();
    std::vector<double> times =
        time_rounds(names, candidates, call, 0, kMinTimedRoundsLast, 0.0, iterations).front();
    spent_us += slowest_rank_took(times, began);
    if (times.empty()) break;  // refused, on every rank alike
    std::vector<std::pair<std::size_t, double>> points = curve->points;
    points.emplace_back(bytes, calib::robust_median(times));
    if (rank_ == 0) COMM_INFO(chosen() << ", took " << points.back().second << " us there");
    native.set(Collective::allreduce, pick, std::move(points));
    selector_->set_native_profile(native);
  }
  return spent_us;
}

// Which of `checks` to time (select/tuning.hpp PointTimer): every one not
// optional and, at each size, the optional one whose cached time is furthest
// behind the cost model's own prediction (the selector holds the cached
// figures, the same on every rank).
std::vector<bool> CommunicatorImpl::points_to_check(const std::vector<CacheCheck>& checks) const {
  std::vector<bool> timed(checks.size());
  std::map<std::size_t, std::pair<double, std::size_t>> suspect;  // bytes -> (cached / model, index)
  for (std::size_t k = 0; k < checks.size(); ++k) {
    const CacheCheck& c = checks[k];
    timed[k] = !c.optional;
    if (!c.optional) continue;  // timed anyway: no model run for it
    const double model = selector_->predict_model(Collective::allreduce, c.point.algorithm, c.point.bytes);
    if (model <= 0) continue;
    const double behind = c.cached_us / model;
    auto [it, added] = suspect.try_emplace(c.point.bytes, behind, k);
    if (!added && behind > it->second.first) it->second = {behind, k};
  }
  for (const auto& [bytes, worst] : suspect) timed[worst.second] = true;
  return timed;
}

std::vector<double> CommunicatorImpl::time_points(const std::vector<CacheCheck>& checks) {
  const std::vector<std::string> names = own_algorithms(*selector_);
  const std::vector<bool> wanted = points_to_check(checks);
  std::size_t largest = 0;
  for (const CacheCheck& c : checks) largest = std::max(largest, std::min(c.point.bytes, kLargestTimed));
  std::vector<float> in(largest / sizeof(float), 1.0f), out(in.size(), 0.0f);
  Call call = timing_call(in.data(), out.data());
  std::vector<Point> timed;   // the points timed and not refused, as time_algorithms collects them
  std::vector<double> times;  // their timed calls, in order
  constexpr std::size_t kNotTimed = static_cast<std::size_t>(-1);
  std::vector<std::size_t> timed_as(checks.size(), kNotTimed);  // index into `timed` per point
  for (std::size_t k = 0; k < checks.size(); ++k) {
    const auto& [name, bytes] = checks[k].point;
    const auto it = std::find(names.begin(), names.end(), name);
    if (!wanted[k] || it == names.end() || bytes > kLargestTimed) continue;
    std::vector<std::size_t> candidates{static_cast<std::size_t>(it - names.begin())};
    call.count = bytes / sizeof(float);
    call.in_bytes = call.out_bytes = bytes;
    int iterations = 0;
    const auto mine = time_rounds(names, candidates, call, kWarmupRounds, kMinTimedRounds,
                                  kRefinementBudgetPerSizeUs, iterations);
    const std::size_t before = timed.size();
    collect(candidates, names.size(), bytes, mine, iterations, timed, times);
    if (timed.size() > before) timed_as[k] = before;
  }
  slowest_rank(times);
  std::vector<double> medians;
  for (const std::size_t t : timed_as) medians.push_back(t == kNotTimed ? -1.0 : point_time(timed[t], times));
  return medians;
}

void CommunicatorImpl::quiesce_windows() {
  if (!direct_engine_) return;
  wait(*run_internal(Collective::barrier, nullptr, nullptr, 0, DataType::f32));
  direct_engine_->touch_windows();
  wait(*run_internal(Collective::barrier, nullptr, nullptr, 0, DataType::f32));
  direct_engine_->read_peer_windows();
  wait(*run_internal(Collective::barrier, nullptr, nullptr, 0, DataType::f32));
}

std::pair<double, double> CommunicatorImpl::timing_start(double calibration_elapsed_us) {
  constexpr int kBarriers = 5;
  std::vector<double> barriers;
  for (int k = 0; k < kBarriers; ++k) {
    const auto t0 = calib::Clock::now();
    wait(*run_internal(Collective::barrier, nullptr, nullptr, 0, DataType::f32));
    barriers.push_back(calib::micros(calib::Clock::now() - t0));
  }
  std::nth_element(barriers.begin(), barriers.begin() + kBarriers / 2, barriers.end());
  std::vector<double> figures{calibration_elapsed_us, barriers[kBarriers / 2]};
  slowest_rank(figures);
  return {figures[0], figures[1]};
}

double CommunicatorImpl::slowest_rank_took(std::vector<double>& times, std::chrono::steady_clock::time_point began) {
  times.push_back(calib::micros(calib::Clock::now() - began));
  slowest_rank(times);
  const double took = times.back();
  times.pop_back();
  return took;
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
