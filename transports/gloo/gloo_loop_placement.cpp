// How Gloo's event-loop thread is scheduled.
//
// Gloo's TCP event loop handles a readable socket only if it can take the
// pair's mutex with try_lock; when it cannot, it returns to epoll_wait, which
// (level-triggered) reports the same socket again at once: it spins. The
// mutex is held by a user thread while it posts a send or receive and writes
// to the socket. If the loop thread, woken by the peer's data, preempts that
// user thread on its CPU, it spins on a lock whose holder cannot run until the
// scheduler tick ends the spinner's slice: 4 ms here (HZ=250). This made the
// 2-4 ms plateaus of the gloo transport (and of Gloo's own allreduce): almost
// every message on a rank bound to one core, and most on a loaded machine.
// Two measures, both taken while CreateDevice starts the loop thread, which
// inherits them:
//  - SCHED_BATCH: the kernel never lets a batch thread preempt on wake-up, so
//    the loop runs when the user thread blocks or yields, by which time the
//    lock is free (on a loaded, unbound 2-core machine: native allreduce
//    median 3.8 ms -> 0.2 ms);
//  - when this thread is bound to some CPUs only, the loop runs on the others,
//    so it never competes with the thread that holds the lock.

#include "gloo_transport.hpp"

#include "util/log.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <string>

namespace comm::gloo_detail {
namespace {

std::string cpu_list(const cpu_set_t& set, int ncpu) {
  std::string s;
  for (int c = 0; c < ncpu; ++c)
    if (CPU_ISSET(c, &set)) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s;
}

}  // namespace

LoopPlacement::LoopPlacement() noexcept {
  sched_param param{};
  // A real-time caller may lack the right to return to its policy: leave it.
  if (::pthread_getschedparam(::pthread_self(), &policy_, &param) == 0 && policy_ == SCHED_OTHER) {
    const sched_param batch{};
    batch_ = ::pthread_setschedparam(::pthread_self(), SCHED_BATCH, &batch) == 0;
  }

  if (::sched_getaffinity(0, sizeof own_, &own_) != 0) return;
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  const int ncpu = static_cast<int>(std::min<long>(online > 0 ? online : 1, CPU_SETSIZE));
  cpu_set_t others;
  CPU_ZERO(&others);
  for (int c = 0; c < ncpu; ++c)
    if (!CPU_ISSET(c, &own_)) CPU_SET(c, &others);
  if (CPU_COUNT(&others) == 0) return;  // unbound: the scheduler spreads the threads
  if (::sched_setaffinity(0, sizeof others, &others) != 0) {
    COMM_DEBUG("gloo transport: the event loop cannot run off CPU(s) " << cpu_list(own_, ncpu)
                                                                       << " (cpuset); it shares them");
    return;
  }
  moved_ = true;
  COMM_INFO("gloo transport: this rank is bound to CPU(s) " << cpu_list(own_, ncpu)
                                                             << "; Gloo's event loop runs on CPU(s) "
                                                             << cpu_list(others, ncpu));
}

LoopPlacement::~LoopPlacement() {
  if (moved_) ::sched_setaffinity(0, sizeof own_, &own_);
  if (batch_) {
    const sched_param normal{};
    if (::pthread_setschedparam(::pthread_self(), policy_, &normal) != 0)
      COMM_WARN("gloo transport: could not restore this thread's scheduling policy after starting Gloo");
  }
}

}  // namespace comm::gloo_detail
