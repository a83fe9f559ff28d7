#pragma once
// The one progress-then-wait loop: everything that drives a transport (the
// communicator's operations, start-up calibration) goes through it, so what
// calibration measures is what collectives see.

#include <algorithm>
#include <chrono>

namespace comm::detail {

// Longest single sleep before deadlines, abort and stalls are checked again.
inline constexpr std::chrono::milliseconds kWaitSlice{50};

// Calls progress() while it makes headway and done() is false; when it makes
// none, sleeps through sleep(until) for at most kWaitSlice (never past
// `deadline`). Returns true once done(), false when `deadline` passes first.
template <class Done, class Progress, class Sleep>
bool progress_until(Done&& done, Progress&& progress, Sleep&& sleep,
                    std::chrono::steady_clock::time_point deadline) {
  while (!done()) {
    if (progress()) continue;
    if (done()) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    sleep(std::min(deadline, now + kWaitSlice));
  }
  return true;
}

}  // namespace comm::detail
