#include "select/timing_plan.hpp"

#include "util/log.hpp"

#include <algorithm>
#include <bit>
#include <array>
#include <iterator>
#include <limits>

namespace comm {
namespace {

// From kContendersFrom on the data is past the caches (where the model's
// large-data rates are least sure): only the algorithms close to the best
// there by what they measured at the size before are timed, at most
// kMaxContenders (kMaxFinalContenders at the last size), and only where one
// round of them fits kContendersRoundBudgetUs (kFinalRoundBudgetUs).
// At the last size each contender's turn is its untimed call and its timed
// one, with no warm-up round before (TimingCandidates::last_size): three cost
// the calls two did with one, and the third slot goes to a third way of
// moving the data (one_per_family_first). Over ofi shm the two slots went to
// two of ring (its halves cut in chunks), direct and tree, never to twoshot
// or rabenseifner (halves sent whole, which the model called ring's twins),
// 1.4-1.6x faster than ring at 32-64 MiB: they carried ring's change there,
// and auto picked ring at 1.34-1.48x the best from 8 MiB on (three runs).
constexpr double kContenderWithin = 1.5;
constexpr std::size_t kMaxContenders = 4, kMaxFinalContenders = 3;
// kContendersFrom is timed where one round of its contenders takes at most
// this long: on 2 x 2 emulated hosts over TCP a round of four takes about
// 90 ms, and without it auto picked 1.14-1.35x the best at 16 MiB, where the
// bare model's from-memory rates mislead most.
constexpr double kContendersRoundBudgetUs = 6 * kTimingBudgetPerSizeUs;
// The last size shows how the time per byte grows once the data comes from
// memory. Its contenders are timed where one round of them, by their
// estimates from 8 MiB, fits this budget (two calls each, the untimed one
// included), and only as many as what is left of the calibration's budget
// allows (cap_past_caches): with rounds of up to 30 ms and no such fit
// (three contenders over ofi shm, two over Gloo) creation took 290-300 ms
// over ofi shm and 430 over Gloo, against 200-220 and 310-330 with them
// (three runs each). Where the round does not fit, the least promising are
// left out, down to the most promising one alone: the change of its ratio
// from kContendersFrom carries to the others (Selector::extend_corrections).
// Carrying the ratios of 8 MiB unchanged put every algorithm over loopback
// TCP at 0.57-0.75x its time at 32-64 MiB, the same way in three runs each
// (UCX and ofi tcp, under cubic: selection-check), as the time per byte of a
// loopback exchange grows 1.55x from 8 to 32 MiB (tcp-floor). Past it the
// ratio measured at kContendersFrom is carried.
constexpr double kFinalRoundBudgetUs = kTimingBudgetPerSizeUs;
// An algorithm the model puts this many times behind the fastest is not timed
// at that size (it will not be chosen there): creation stays short. Where one
// round of every candidate would exceed the size's budget, only those within
// kHopelessWhenSlow of the fastest are timed.
constexpr double kHopeless = 4.0;
constexpr double kHopelessWhenSlow = 2.0;
// The few contender slots past the caches go to one algorithm of each way of
// moving the data first (Selector::moves_alike at this size and the size
// before): on loopback TCP the four most promising at 8 MiB were half
// exchangers and `direct`, and tree, 1.7x ring's time at 1 MiB but
// 0.66-0.79x from 32 MiB on, was never timed past 1 MiB: predicted at
// 1.8-2.7x its time there. Before the last size the way it moves the data at
// the last size counts too, as only algorithms measured here contend there:
// at 8 MiB ring's chunks are few enough to count as twoshot's halves (8
// messages against 2), at 32 MiB not (32). On 2 ranks the fourth slot at 8
// MiB went to a second of another family, in 11 of 30 runs over UCX and ofi
// shm the twin of one already timed (the same schedule on 2 ranks), and in 6
// to none of ring's: over UCX shm, where ring is the fastest at 32-64 MiB by
// 1.1-1.2x, auto then picked hierarchical at 1.10-1.22x the best there.
// Reorders `promising` (most promising first) so that the first algorithm of
// each family comes before every second one, order kept within.
// `moves[i]`: how algorithm i moves the data at the sizes compared.
void one_per_family_first(std::vector<std::size_t>& promising, const std::vector<Selector::Movement>& moves) {
  std::vector<std::size_t> firsts, seconds;
  for (const std::size_t i : promising) {
    const bool seen = std::any_of(firsts.begin(), firsts.end(),
                                  [&](std::size_t f) { return Selector::moves_alike(moves[f], moves[i]); });
    (seen ? seconds : firsts).push_back(i);
  }
  firsts.insert(firsts.end(), seconds.begin(), seconds.end());
  promising = std::move(firsts);
}

}  // namespace

// `so_far`: the times measured at the smaller sizes. An algorithm's estimate
// is its model scaled by what it measured at the size before, where it was
// timed there (from kContendersFrom on only those count). It is worth timing
// when its estimate, its bare model or its time before grown in proportion to
// the size puts it close enough to the best estimate, or (below
// kContendersFrom) its bare model is close enough to the best bare model: each alone has
// misled. On 2 x 2 emulated hosts the bare model put hierarchical_rail 2x too
// fast at 1 MiB and so called ring, which measured as fast, hopeless there; at
// 8 MiB the model's from-memory rates put hierarchical_rail fourth, and it was
// the fastest from 1 MiB on, its time growing in proportion to the size.
TimingCandidates worth_timing(const Selector& selector, const std::vector<std::string>& names, std::size_t bytes,
                              const NativeProfile& so_far) {
  const auto rung = std::find(std::begin(kTimingLadder), std::end(kTimingLadder), bytes);
  const bool contenders = bytes >= kContendersFrom;  // only the contenders are timed here
  const bool final = rung == std::end(kTimingLadder) - 1;
  const std::size_t before = rung == std::begin(kTimingLadder) ? 0 : *(rung - 1);
  double best = std::numeric_limits<double>::infinity(), best_bare = best;
  std::vector<double> bare(names.size()), estimate(names.size()), optimistic(names.size());
  std::vector<Selector::Movement> moves(names.size());  // {here, the size before}
  for (std::size_t i = 0; i < names.size(); ++i) {
    const double model = selector.predict_model(Collective::allreduce, names[i], bytes);
    bare[i] = estimate[i] = optimistic[i] = model;
    if (model >= 0) best_bare = std::min(best_bare, model);
    if (model < 0 || before == 0) continue;
    const NativeCurve* curve = so_far.find(Collective::allreduce, names[i]);
    const double model_before = selector.predict_model(Collective::allreduce, names[i], before);
    // Before the last size, also how it moves the data there: its contenders
    // are those measured here (below).
    moves[i] = contenders && !final ? selector.movement(Collective::allreduce, names[i], {bytes, before, kLargestTimed})
                                    : selector.movement(Collective::allreduce, names[i], {bytes, before});
    if (curve && curve->points.back().first == before && model_before > 0) {
      const double measured_before = curve->points.back().second;
      estimate[i] = model * measured_before / model_before;
      const double proportional = measured_before * static_cast<double>(bytes) / static_cast<double>(before);
      optimistic[i] = std::min({model, estimate[i], proportional});
    } else if (contenders) {
      estimate[i] = optimistic[i] = -1.0;
    }
  }
  for (const double e : estimate)
    if (e >= 0) best = std::min(best, e);
  const std::array<double, 2> limits = contenders ? std::array<double, 2>{kContenderWithin, kContenderWithin}
                                                  : std::array<double, 2>{kHopeless, kHopelessWhenSlow};
  std::vector<std::size_t> chosen;
  for (const double limit : limits) {
    chosen.clear();
    double round_us = 0;
    for (std::size_t i = 0; i < names.size(); ++i)
      if (optimistic[i] >= 0 && (optimistic[i] <= limit * best || (!contenders && bare[i] <= limit * best_bare))) {
        chosen.push_back(i);
        round_us += estimate[i];
      }
    if (round_us <= kTimingBudgetPerSizeUs) break;
  }
  // Most promising first, of as many families as there are (fit_to_budget keeps a prefix).
  std::stable_sort(chosen.begin(), chosen.end(),
                   [&](std::size_t a, std::size_t b) { return optimistic[a] < optimistic[b]; });
  one_per_family_first(chosen, moves);
  const std::size_t most = final ? kMaxFinalContenders : kMaxContenders;
  if (contenders && chosen.size() > most) chosen.resize(most);  // the most promising few
  TimingCandidates c;
  c.last_size = final;
  for (const std::size_t i : chosen) c.add(i, estimate[i]);
  // Past the caches the model is least sure of itself, and the choice there
  // is for every larger message, so a round may cost more (once per setup:
  // the result is cached); where even one contender is too slow, the model's
  // shape carries the ratios measured at the size before.
  const double round_budget_us = final ? kFinalRoundBudgetUs : kContendersRoundBudgetUs;
  if (!contenders || c.round_us() <= round_budget_us) return c;
  if (!final) return {};
  while (c.indices.size() > 1 && c.round_us() > round_budget_us) {
    c.indices.pop_back();
    c.us.pop_back();
  }
  return c.round_us() <= round_budget_us ? c : TimingCandidates{};
}

namespace {

// The fastest algorithm measured at exactly `bytes` (names.size(): none).
std::size_t fastest_at(const std::vector<std::string>& names, std::size_t bytes, const NativeProfile& so_far) {
  std::size_t fastest = names.size();
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (const NativeCurve* curve = so_far.find(Collective::allreduce, names[i]))
      for (const auto& [b, us] : curve->points)
        if (b == bytes && us < best) best = us, fastest = i;
  return fastest;
}

// Every algorithm's prediction at `bytes` by the corrected model (negative: not
// predicted there) and the fastest of them (names.size(): none).
struct Predictions {
  std::vector<double> us;
  std::size_t fastest;
  double best = std::numeric_limits<double>::infinity();
};

Predictions predict_all(const Selector& corrected, const std::vector<std::string>& names, std::size_t bytes) {
  Predictions p{std::vector<double>(names.size()), names.size()};
  for (std::size_t i = 0; i < names.size(); ++i) {
    p.us[i] = corrected.predict(Collective::allreduce, names[i], bytes);
    if (p.us[i] >= 0 && p.us[i] < p.best) p.best = p.us[i], p.fastest = i;
  }
  return p;
}

}  // namespace

Refinement refinement_between(const Selector& corrected, const std::vector<std::string>& names, std::size_t lo,
                              std::size_t hi, const NativeProfile& so_far) {
  if (lo == 0 || hi < 4 * lo || hi > kContendersFrom) return {};
  // Halfway in log terms, rounded down to a power of two: the buckets the selector evaluates.
  const int mid_log = (std::bit_width(lo) - 1 + std::bit_width(hi) - 1) / 2;
  const std::size_t mid = std::size_t{1} << mid_log;
  const std::size_t at_lo = fastest_at(names, lo, so_far), at_hi = fastest_at(names, hi, so_far);
  const Predictions predicted = predict_all(corrected, names, mid);
  // One algorithm fastest at both ends and predicted fastest between: no crossover to place.
  if (at_lo == at_hi && predicted.fastest == at_lo) return {};
  Refinement r;
  r.bytes = mid;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (const double e = predicted.us[i];
        e >= 0 && (i == at_lo || i == at_hi || e <= kRefinementWithin * predicted.best))
      r.candidates.add(i, e);
  if (r.candidates.indices.size() < 2) return {};
  return r;
}

TimingCandidates challenger_at(const Selector& corrected, const std::vector<std::string>& names, std::size_t bytes,
                               const NativeProfile& so_far) {
  const std::size_t fastest = fastest_at(names, bytes, so_far);
  if (fastest == names.size()) return {};
  const Predictions predicted = predict_all(corrected, names, bytes);
  const std::size_t challenger = predicted.fastest;
  if (challenger == names.size() || challenger == fastest) return {};
  if (const NativeCurve* curve = so_far.find(Collective::allreduce, names[challenger]))
    for (const auto& point : curve->points)
      if (point.first == bytes) return {};  // timed here: the selector already uses its own time
  TimingCandidates c;
  c.add(challenger, predicted.best);
  c.add(fastest, predicted.us[fastest]);
  return c;
}

void fit_to_budget(TimingCandidates& c, const TimingCost& cost, double left_us, std::size_t at_least) {
  std::size_t keep = 0;
  double spent = cost.per_size();
  for (; keep < c.indices.size(); ++keep) {
    const double more = cost.per_candidate(c.us[keep]);
    if (keep >= at_least && spent + more > left_us) break;
    spent += more;
  }
  c.indices.resize(keep);
  c.us.resize(keep);
}

void cap_past_caches(TimingCandidates& c, const TimingCost& cost, double so_far_us, double budget_left_us) {
  if (c.indices.empty()) return;
  const double planned_us = cost.of(c);
  if (so_far_us + planned_us > kCalibrationCapUs) c = {};
  if (cost.bytes >= kLargestTimed) fit_to_budget(c, cost, budget_left_us);
  if (c.indices.empty())
    COMM_DEBUG("calibration: all-reduce of " << cost.bytes << " B left out: " << planned_us / 1e3
                                             << " ms estimated, " << budget_left_us / 1e3
                                             << " ms left of the timing budget, calibration at " << so_far_us / 1e3
                                             << " of at most " << kCalibrationCapUs / 1e3 << " ms");
}

}  // namespace comm
