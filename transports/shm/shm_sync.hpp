#pragma once
// Waking and waiting through the segment: spin briefly, then yield, then sleep
// on a futex, with every sleep bounded so that liveness, abort and deadlines
// are checked at least every `slice`.
//
// A rank sleeps on its own doorbell word, not on the flag or ring it waits
// for: one sleep then covers a wait on several peers' flags plus its rings,
// and interrupt() (which bumps the doorbell before waking it) can never be
// lost between the last check and the sleep. Whoever makes progress another
// rank may be waiting for (a flag, a ring record, freed ring space) calls
// wake(): a fence and one load of the header's sleeper count when nobody
// sleeps, a doorbell bump and FUTEX_WAKE when somebody does.
//
// The handshake is Dekker's: the waker stores its data, fences, then reads
// `sleepers`; the sleeper announces itself (sleeping, sleepers++), then
// re-checks the data, then futex-waits on the doorbell value it read before
// announcing. Either the waker sees the sleeper or the sleeper sees the data.

#include "shm_segment.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace comm::shm {

using Clock = std::chrono::steady_clock;

void futex_wake_all(std::atomic<std::uint32_t>& word) noexcept;
/// Sleeps while `word` holds `expected`, at most `timeout` (returns early on a
/// wake, a signal, or a changed value).
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::chrono::nanoseconds timeout) noexcept;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

/// How long a waiter spins and yields before it sleeps (shm.spin_us /
/// COMM_SHM_SPIN_US and shm.yield_us / COMM_SHM_YIELD_US).
struct WaitPolicy {
  std::chrono::nanoseconds spin{std::chrono::microseconds(2)};
  std::chrono::nanoseconds yield{std::chrono::microseconds(1000)};
  std::chrono::milliseconds slice{50};  ///< longest sleep between liveness checks
};

enum class WaitOutcome { ready, timeout, interrupted };

class Sync {
 public:
  Sync(const Segment& segment, int rank, WaitPolicy policy) : seg_(&segment), rank_(rank), policy_(policy) {}

  /// Wakes every rank asleep on its doorbell (they re-check what they wait for).
  /// Call after publishing something (flag, ring record, ring space).
  void wake_sleepers() const noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (seg_->header().sleepers.load(std::memory_order_relaxed) == 0) return;
    wake_slow(-1);
  }
  /// Wakes `peer` if it sleeps.
  void wake(int peer) const noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (seg_->header().sleepers.load(std::memory_order_relaxed) == 0) return;
    wake_slow(peer);
  }
  /// From any thread: wakes this rank's waiter; every later wait returns interrupted.
  void interrupt() noexcept;
  bool interrupted() const noexcept { return interrupted_.load(std::memory_order_acquire); }

  /// Waits until ready() holds, deadline passes or interrupt() was called.
  /// check() runs about every millisecond once spinning is over, and after
  /// every sleep; it throws to end the wait (a dead peer).
  template <class Ready, class Check>
  WaitOutcome wait_until(Ready&& ready, Check&& check, Clock::time_point deadline);

  const WaitPolicy& policy() const noexcept { return policy_; }

 private:
  void wake_slow(int only) const noexcept;
  void announce_sleep() noexcept;
  void end_sleep() noexcept;

  const Segment* seg_;
  int rank_;
  WaitPolicy policy_;
  std::atomic<bool> interrupted_{false};
};

template <class Ready, class Check>
WaitOutcome Sync::wait_until(Ready&& ready, Check&& check, Clock::time_point deadline) {
  // Spin: the peer is usually a fraction of a microsecond away. The first
  // polls go without a pause or a clock read, either of which would delay
  // seeing the flag by its own length (8 B, 2 ranks over shm on an EPYC VM,
  // timed in one job against pausing polls, blocks alternating: 3-10 ns of
  // ~165); past them the pause keeps a long spin kind to a sibling hardware
  // thread.
  constexpr unsigned kEagerPolls = 64;
  for (unsigned i = 0; i < kEagerPolls; ++i)
    if (ready()) return WaitOutcome::ready;
  const auto start = Clock::now();
  auto t = start;
  for (unsigned i = 1; policy_.spin.count() > 0; ++i) {
    cpu_relax();
    if (ready()) return WaitOutcome::ready;
    if ((i & 15) == 0) {
      t = Clock::now();
      if (interrupted()) return WaitOutcome::interrupted;
      if (t >= deadline) return WaitOutcome::timeout;
      if (t - start >= policy_.spin) break;
    }
  }
  auto last_check = t;
  while (t - start < policy_.spin + policy_.yield) {  // yield: let a rank without a core of its own run
    std::this_thread::yield();
    if (ready()) return WaitOutcome::ready;
    t = Clock::now();
    if (interrupted()) return WaitOutcome::interrupted;
    if (t >= deadline) return WaitOutcome::timeout;
    if (t - last_check >= std::chrono::milliseconds(1)) {
      check();
      last_check = t;
    }
  }
  RankControl& me = seg_->control(rank_);
  for (;;) {  // sleep, at most a slice at a time
    const std::uint32_t bell = me.doorbell.load(std::memory_order_acquire);
    announce_sleep();
    const bool go = ready() || interrupted();
    if (!go) {
      const auto left = deadline - Clock::now();
      futex_wait(me.doorbell, bell, std::min<Clock::duration>(left, policy_.slice));
    }
    end_sleep();
    if (ready()) return WaitOutcome::ready;
    if (interrupted()) return WaitOutcome::interrupted;
    if (Clock::now() >= deadline) return WaitOutcome::timeout;
    check();
  }
}

}  // namespace comm::shm
