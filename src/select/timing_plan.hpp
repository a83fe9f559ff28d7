#pragma once
// Which of comm's own all-reduce algorithms start-up calibration times at
// each size of its ladder, and how many rounds (core/algorithm_timing.cpp
// runs them): enough evidence for the selector to choose on, in a creation
// that stays short.

#include "select/native_profile.hpp"
#include "select/selector.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace comm {

// Powers of two, like the native ladder: the selector evaluates each size
// bucket at 2^b. Beyond the last point the model's shape carries the ratio.
// From kContendersFrom on the data is past the caches and only the
// contenders are timed (worth_timing). The last size is where the data comes
// from memory rather than from a large cache: on this project's VM two
// processes copy 8-16 MiB buffers at 14 GB/s each and 64 MiB ones at 7.7, and
// every all-reduce's time per byte grew 1.3-1.75x from 8 to 64 MiB (shm,
// loopback UCX TCP), which carrying the ratio measured at 8 MiB missed:
// predictions at 32-64 MiB were 0.5-0.8x the measured times.
inline constexpr std::size_t kTimingLadder[] = {8,       4096, 65536, std::size_t{1} << 20, std::size_t{8} << 20,
                                                std::size_t{32} << 20};
inline constexpr std::size_t kContendersFrom = std::size_t{8} << 20;
inline constexpr std::size_t kLargestTimed = kTimingLadder[std::size(kTimingLadder) - 1];

// Timed rounds per size: at least kMinTimedRounds (kMinTimedRoundsLast from
// kContendersFrom on: a few contenders, each costly), then more while the size's
// time stays within kTimingBudgetPerSizeUs on every rank (agreed before each
// round), at most kMaxTimedRounds. Warm-up rounds come first (one untimed
// call per candidate).
inline constexpr double kTimingBudgetPerSizeUs = 20000;
inline constexpr int kMinTimedRounds = 2, kMaxTimedRounds = 5, kMinTimedRoundsLast = 1;
// Where rounds are cheap, more of them, up to kMaxCheapRounds, while the size
// has taken under kCheapSizeUs on every rank: calls of a fraction of a
// microsecond vary by half their time from call to call here, and on shared
// memory mem_oneshot's 8 B median over 10 calls measured 0.72-0.98x
// mem_twoshot's in 40 calibrations (and 1.03x in one more, so auto picked
// mem_twoshot, 0.20 against 0.17 us). A round of every candidate there takes
// tens of microseconds; over TCP one takes about a millisecond, so nothing changes.
inline constexpr int kMaxCheapRounds = 40;
inline constexpr double kCheapSizeUs = 2000;
inline constexpr int kWarmupRounds = 1;
// A candidate's turn in a round (core/algorithm_timing.cpp): untimed calls,
// two in cache (up to `cache_bytes`) and one past it, then timed ones, back
// to back: two, and one at the last size, where a call takes milliseconds
// (on shm a second one there added 40 ms to creation). Past the cache the
// first call of a turn, after another algorithm's, can be the slow one: on
// shm mem_peer_twoshot took 9.8-11.6 ms at 32 MiB, then 7.8-8.7 (back to
// back 8.4), and 2.78 then 1.32 ms at 8 MiB. Timed with no untimed call at 8
// MiB, it measured 1.14-1.44x comm-bench's back-to-back time there in three
// calibrations, and auto's choice followed the noise (mem_twoshot at 1.16x
// mem_peer_twoshot); with the untimed call 1.01-1.28x, in the order
// comm-bench measured.
inline int timed_calls_per_turn(std::size_t bytes) { return bytes >= kLargestTimed ? 1 : 2; }
inline int warm_calls_per_turn(std::size_t bytes, std::size_t cache_bytes) { return bytes <= cache_bytes ? 2 : 1; }
// From this size up to the model's cache size a direct-memory candidate's
// turn first touches the windows again (CommunicatorImpl::quiesce_windows;
// core/algorithm_timing.cpp): its data moves through the whole window call
// by call, and after the other candidates' turns the window has left the
// caches (past the cache size a call's own data does that). On shm, 2
// ranks, after a 16 MiB memset mem_twoshot took 35, then 24 us for six calls, then 17 at
// 256 KiB (the ring's lap); calibration timed it at 1.43-1.63x comm-bench's
// back-to-back time at 1 MiB and 1.13-1.76x at 64 KiB in four jobs, 1.01-1.25x
// and 0.92-1.29x with the touch, creation as long (250-300 ms). Below it a
// turn's calls are few microseconds and the touch (about 0.3 ms) would eat
// the cheap rounds.
inline constexpr std::size_t kQuiesceTurnsFrom = std::size_t{64} << 10;
inline bool touch_windows_per_turn(std::size_t bytes, std::size_t cache_bytes) {
  return bytes >= kQuiesceTurnsFrom && bytes <= cache_bytes;
}

// The algorithms worth timing at one size (indices into the names, most
// promising first) and each one's estimated time of one call (`us`, parallel
// to `indices`).
struct TimingCandidates {
  std::vector<std::size_t> indices;
  std::vector<double> us;
  // The last size's (kLargestTimed): no warm-up round.
  bool last_size = false;
  void add(std::size_t index, double estimate_us) {
    indices.push_back(index);
    us.push_back(estimate_us);
  }
  /// The estimated time of one round of them.
  double round_us() const {
    double sum = 0;
    for (const double u : us) sum += u;
    return sum;
  }
  /// Warm-up rounds before their timed ones: none at the last size, where
  /// every contender ran at the size before and each turn's untimed call
  /// comes right before its timed one. At 8 MiB, without the warm-up round,
  /// calibration over UCX shm timed ring and twoshot at 1.25-1.65x
  /// comm-bench's time in three runs, and predictions at 8-64 MiB missed by
  /// as much (UCX shm and tcp, ofi tcp: 56-58 of 64 within 25 %, 64 with it).
  int warmup_rounds() const { return last_size ? 0 : kWarmupRounds; }
};

// Creation's calibration aims to add at most 0.3 s: kCalibrationTargetUs,
// and the check of the figures just measured after it (tuning.cpp, 5-40 ms).
// comm's own algorithms are timed in what the links, compute and native
// collectives left of the target, never less than kMinAlgorithmTimingUs:
// the rungs up to 1 MiB trimmed to fit (never below kMinCandidatesInCache),
// then challengers and refinements while it lasts (core/algorithm_timing.cpp;
// the rungs past the caches have their own round budgets, above, and the cap below).
// Without it, creation took 410-436 ms over Gloo (276 of them timing
// algorithms, calls of tens of microseconds to milliseconds) and 0.7-1.3 s
// with 8 ranks on 2 cores (the 1 MiB size alone 300 ms); the sizes and
// candidates left out carry the ratios measured beside them, as those past
// the per-size budgets always have.
inline constexpr double kCalibrationTargetUs = 280000, kMinAlgorithmTimingUs = 60000;
inline double algorithm_timing_budget_us(double calibration_elapsed_us) {
  return std::max(kMinAlgorithmTimingUs, kCalibrationTargetUs - calibration_elapsed_us);
}
// Optional timing (a challenger, a refinement) that costs less than this runs
// whatever is left of the budget: on shared memory one at up to 64 KiB costs
// 0.1-1 ms, and the crossovers it places (mem_oneshot / mem_twoshot at 2-8
// KiB) are decode's.
inline constexpr double kAlwaysAffordableUs = 2000;
// What timing candidates at one size costs: their calls (the warm-up round's
// one per turn, then `rounds` timed rounds) and the synchronisation around
// them, a barrier before each call a turn times (the warm-up round's
// included) and each round's agreement on whether the size's budget is
// spent, `sync_us` each (calibration times a few barriers before it plans).
// Without the synchronisation the estimates were 1.3-2x under what sizes took
// (Gloo 8 B: 21.7 ms for 12.3 estimated; 8 ranks on 2 cores over ofi: a 4 KiB
// rung planned to fit took 54-81 ms).
struct TimingCost {
  std::size_t bytes = 0;
  std::size_t cache_bytes = 0;
  int rounds = 0;
  double sync_us = 0;
  int warmup_rounds = kWarmupRounds;  // TimingCandidates::warmup_rounds

  // One candidate whose call takes `us`.
  double per_candidate(double us) const {
    const int warm = warm_calls_per_turn(bytes, cache_bytes), timed = timed_calls_per_turn(bytes);
    return us * (warmup_rounds + rounds * (warm + timed)) + sync_us * (warmup_rounds + rounds * timed);
  }
  // The size's own: every round's agreement.
  double per_size() const { return sync_us * (warmup_rounds + rounds); }
  double of(const TimingCandidates& c) const {
    double sum = per_size();
    for (const double us : c.us) sum += per_candidate(us);
    return sum;
  }
};
// Keeps the most promising candidates (a prefix of `c`): the first
// `at_least`, then as many more as fit `left_us`.
void fit_to_budget(TimingCandidates& c, const TimingCost& cost, double left_us, std::size_t at_least = 0);
// Below kContendersFrom every ladder size is timed, over budget or not, with
// at least this many of its candidates (two ways of moving the data, where
// there are two): the selector's ratios at the sizes past it and between
// its rungs all start from these.
inline constexpr std::size_t kMinCandidatesInCache = 2;
// The rungs past the caches are timed only while calibration as a whole stays
// under kCalibrationCapUs with them (by their estimated cost): with 8 ranks on
// 2 cores the 8 MiB rung alone took 376 ms over ofi tcp (calls of ~60 ms,
// every rank sharing a core with three others) and creation 1.0 s; on 2 ranks
// calibration reaches them after 0.15-0.35 s and they cost 30-100 ms.
inline constexpr double kCalibrationCapUs = 600000;
// Drops the candidates of a rung past the caches (all of them) when timing
// them would take calibration, `so_far_us` into it, past kCalibrationCapUs,
// and at the last size (kLargestTimed) the least promising ones that do not
// fit `budget_left_us` either; says so at debug level.
void cap_past_caches(TimingCandidates& c, const TimingCost& cost, double so_far_us,
                     double budget_left_us = std::numeric_limits<double>::infinity());

// `so_far`: what was measured at the smaller sizes of the ladder.
TimingCandidates worth_timing(const Selector& selector, const std::vector<std::string>& names, std::size_t bytes,
                              const NativeProfile& so_far);

// Between two neighbouring timed sizes the selector interpolates each
// algorithm's measured ratio to its model (in log size), so where the fastest
// changes between them the crossover can land anywhere in those octaves: on
// shm, with points at 64 KiB and 1 MiB only, auto picked mem_peer_twoshot at
// 128 KiB at 1.22-1.41x mem_peer_oneshot. Calibration therefore times the
// size halfway (in log terms) between such neighbours, then halves again,
// while the refinement as a whole stays within kRefinementBudgetUs; not
// past kContendersFrom, where one call takes milliseconds.
// Each refinement size takes more than kMinTimedRounds rounds only while it
// has spent less than kRefinementBudgetPerSizeUs.
inline constexpr double kRefinementBudgetUs = 40000, kRefinementBudgetPerSizeUs = 5000;
// Timed at a refinement size: the fastest measured at either neighbour and
// every algorithm the corrected model puts within this factor of the best there.
inline constexpr double kRefinementWithin = 1.25;

struct Refinement {
  std::size_t bytes = 0;  ///< 0: nothing worth timing between the neighbours
  TimingCandidates candidates;
};

// `corrected`: a selector holding `so_far` as its measured profile
// (Selector::set_measured_profile), so that its predictions carry the ratios
// measured at `lo` and `hi`, the neighbouring sizes timed.
Refinement refinement_between(const Selector& corrected, const std::vector<std::string>& names, std::size_t lo,
                              std::size_t hi, const NativeProfile& so_far);

// After a size was timed, the algorithm the corrected model now puts fastest
// there may be one that was not timed at that size: its prediction is
// interpolated from sizes timed in other moments, while the ones timed here
// carry this moment's state of the machine. On shm, a slow spell at the
// 8 KiB refinement (mem_twoshot 3.3 us, 0.69 us at 4 KiB) left `hierarchical`,
// untimed there, predicted at 2.4 us, and auto picked it at 10.6 us. So such
// a challenger is timed at that size beside the fastest timed there (whose
// time is measured again), up to kMaxChallengers per size.
inline constexpr int kMaxChallengers = 2;

// The challenger at `bytes` (names.size(): the predicted fastest was timed
// there, or nothing is predicted), with the fastest measured there as its
// opponent; `corrected` holds `so_far` as its measured profile.
TimingCandidates challenger_at(const Selector& corrected, const std::vector<std::string>& names, std::size_t bytes,
                               const NativeProfile& so_far);

}  // namespace comm
