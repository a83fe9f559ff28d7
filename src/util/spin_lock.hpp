#pragma once
// A lock for critical sections of a few stores that one thread takes on the
// hot path and another takes rarely (the flight recorder: the communicator's
// thread writes a record per operation, a dump reads them): one atomic
// exchange and one store, where an uncontended std::mutex costs two library
// calls. Waiters spin, yielding, so hold it only for a handful of
// instructions. Meets Lockable (std::lock_guard works).

#include <atomic>
#include <thread>

namespace comm::util {

class SpinLock {
 public:
  void lock() noexcept {
    while (held_.exchange(true, std::memory_order_acquire))
      while (held_.load(std::memory_order_relaxed)) std::this_thread::yield();
  }
  bool try_lock() noexcept { return !held_.exchange(true, std::memory_order_acquire); }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

}  // namespace comm::util
