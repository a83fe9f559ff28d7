#pragma once
// Which of comm's own all-reduce algorithms start-up calibration times at
// each size of its ladder, and how many rounds (core/algorithm_timing.cpp
// runs them): enough evidence for the selector to choose on, in a creation
// that stays short.

#include "select/native_profile.hpp"
#include "select/selector.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace comm {

// Powers of two, like the native ladder: the selector evaluates each size
// bucket at 2^b. Beyond the last point the model's shape carries the ratio.
inline constexpr std::size_t kTimingLadder[] = {8, 4096, 65536, std::size_t{1} << 20, std::size_t{8} << 20};
inline constexpr std::size_t kLargestTimed = kTimingLadder[std::size(kTimingLadder) - 1];

// Timed rounds per size: at least kMinTimedRounds (kMinTimedRoundsLast at the
// largest size: a few contenders, each costly), then more while the size's
// time stays within kTimingBudgetPerSizeUs on every rank (agreed before each
// round), at most kMaxTimedRounds. Warm-up rounds come first and are not counted.
inline constexpr double kTimingBudgetPerSizeUs = 20000;
inline constexpr int kMinTimedRounds = 3, kMaxTimedRounds = 9, kMinTimedRoundsLast = 2;
inline int timing_warmup(double predicted_round_us) { return predicted_round_us > 2000 ? 1 : 2; }

// The algorithms worth timing at one size (indices into the names) and the
// estimated time of one round of them.
struct TimingCandidates {
  std::vector<std::size_t> indices;
  double round_us = 0;
};

// `so_far`: what was measured at the smaller sizes of the ladder.
TimingCandidates worth_timing(const Selector& selector, const std::vector<std::string>& names, std::size_t bytes,
                              const NativeProfile& so_far);

}  // namespace comm
