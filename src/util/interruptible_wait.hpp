#pragma once
// The wait()/interrupt() pair of a transport whose completions are signalled
// by other threads: a condition variable plus the interrupt flag it honours,
// both guarded by a mutex the transport owns.

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace comm::util {

class InterruptibleWait {
 public:
  /// With `lk` (the owner's mutex) held: sleeps until done(), an interrupt()
  /// or the deadline, whichever comes first, and consumes the interrupt.
  template <class Done>
  void wait_until(std::unique_lock<std::mutex>& lk, std::chrono::steady_clock::time_point deadline, Done done) {
    cv_.wait_until(lk, deadline, [&] { return interrupted_ || done(); });
    interrupted_ = false;
  }
  void wait_until(std::unique_lock<std::mutex>& lk, std::chrono::steady_clock::time_point deadline) {
    wait_until(lk, deadline, [] { return false; });
  }
  /// Wakes the waiter (now, or its next wait if none sleeps); `mu` is the owner's mutex, not held.
  void interrupt(std::mutex& mu) noexcept {
    {
      std::lock_guard lk(mu);
      interrupted_ = true;
    }
    cv_.notify_all();
  }
  /// Wakes the waiter to re-check done().
  void notify() noexcept { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
  bool interrupted_ = false;
};

}  // namespace comm::util
