#include "shm_sync.hpp"

#include <climits>
#include <ctime>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace comm::shm {

// Shared (not FUTEX_PRIVATE) futexes: the words live in memory mapped by several processes.
void futex_wake_all(std::atomic<std::uint32_t>& word) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::chrono::nanoseconds timeout) noexcept {
  if (timeout.count() <= 0) return;
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void Sync::wake_slow(int only) const noexcept {
  const int n = seg_->layout().nranks;
  for (int r = 0; r < n; ++r) {
    if (r == rank_ || (only >= 0 && r != only)) continue;
    RankControl& c = seg_->control(r);
    if (!c.sleeping.load(std::memory_order_seq_cst)) continue;
    c.doorbell.fetch_add(1, std::memory_order_acq_rel);
    futex_wake_all(c.doorbell);
  }
}

void Sync::interrupt() noexcept {
  interrupted_.store(true, std::memory_order_release);
  RankControl& me = seg_->control(rank_);
  me.doorbell.fetch_add(1, std::memory_order_acq_rel);
  futex_wake_all(me.doorbell);
}

void Sync::announce_sleep() noexcept {
  seg_->control(rank_).sleeping.store(1, std::memory_order_seq_cst);
  seg_->header().sleepers.fetch_add(1, std::memory_order_seq_cst);
}

void Sync::end_sleep() noexcept {
  seg_->header().sleepers.fetch_sub(1, std::memory_order_seq_cst);
  seg_->control(rank_).sleeping.store(0, std::memory_order_relaxed);
}

}  // namespace comm::shm
