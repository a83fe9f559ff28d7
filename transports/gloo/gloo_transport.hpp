#pragma once
// The `gloo` transport: point-to-point over Gloo's TCP unbound buffers, plus
// Gloo's own collectives offered as the algorithms `native` / `native_bcube`.
// See README.md for the design (completion threads, slots, failure handling).

#include <comm/transport.hpp>

#include "core/transport_base.hpp"
#include "util/non_copyable.hpp"

#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <atomic>
#include <csignal>
#include <sched.h>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace gloo::transport::tcp {
class Context;
}

namespace comm {

void register_gloo_transport();

namespace gloo_detail {

/// Translates the exception being handled (call only inside a catch block)
/// into a comm::Error whose message starts with `what`. Gloo's IoException
/// texts are classified into timeout / peer_failed / transport_failure;
/// gloo::EnforceNotMet (which does not derive from gloo::Exception) and every
/// other exception become transport_failure. A comm::Error passes unchanged.
Error translate_current_exception(std::string_view what);

/// Blocks SIGPIPE in this thread while Gloo runs on it and discards one that
/// Gloo raised meanwhile. Gloo writes to sockets with writev(), which raises
/// SIGPIPE once a peer has gone, and the default action kills the process;
/// we want the EPIPE error instead, without changing the process's handlers.
class SigpipeBlock : NonCopyable {
 public:
  SigpipeBlock() noexcept;
  ~SigpipeBlock();

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
};

/// While alive, this thread is SCHED_BATCH (if it was SCHED_OTHER) and, if it
/// is bound to some CPUs only, runs on the others, so that the thread it
/// starts (Gloo's event loop, inside CreateDevice) inherits both: it never
/// preempts, nor shares a CPU with, the user thread whose lock it spins on.
/// The destructor restores this thread. See gloo_loop_placement.cpp for why.
class LoopPlacement : NonCopyable {
 public:
  LoopPlacement() noexcept;
  ~LoopPlacement();

 private:
  cpu_set_t own_{};
  int policy_ = SCHED_OTHER;
  bool moved_ = false;
  bool batch_ = false;
};

class GlooTransport;
class WatchedBuffer;

/// Gloo's options-based collectives (never the legacy AllreduceRing* classes,
/// which shrink the socket send buffer). Reductions use comm's own kernels
/// through Gloo's reduce-function hook, so every dtype and op is supported.
class GlooNative final : public NativeCollectivesOf<GlooTransport> {
 public:
  using NativeCollectivesOf::NativeCollectivesOf;
  COMM_NATIVE_COLLECTIVES_OVERRIDES;

 private:
  void run_gloo(const CollectiveArgs& args, bool bcube);
  void run_single_rank(const CollectiveArgs& args);

  std::vector<std::byte> scratch_;  ///< reduce's full-size output on non-roots; in-place all_to_all copy
};

class GlooTransport final : public NativeTransportBase<GlooTransport, GlooNative> {
 public:
  explicit GlooTransport(const TransportInit& init);
  ~GlooTransport() override;

  COMM_TRANSPORT_POINT_TO_POINT_OVERRIDES;

  // ---- for GlooNative
  const std::shared_ptr<gloo::rendezvous::Context>& context() const noexcept { return context_; }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  /// Throws transport_failure quoting the first failure if the Gloo context is unusable.
  void check_usable(std::string_view what) const;
  /// Records that the Gloo context can no longer be trusted (first reason wins).
  void mark_failed(const std::string& reason) noexcept;

 private:
  struct PendingOp;
  struct Waiter;
  struct SelfMessage {
    Completion* completion = nullptr;
    std::uint64_t tag = 0;
    const void* send_data = nullptr;
    void* recv_data = nullptr;
    std::size_t bytes = 0;
  };

  void post(bool is_send, int peer, std::uint64_t tag, void* data, std::size_t bytes, Completion& c);
  /// A message to self: matched with the first waiting one of the other direction and tag, else queued.
  void post_self(bool is_send, const SelfMessage& mine);
  void match_self(const SelfMessage& send, const SelfMessage& recv);
  bool cancel_self(Completion& c) noexcept;
  /// True if an operation finished that progress() has not reported yet.
  bool any_finished();
  /// Sleeps on one operation's own condition variable; see wait() in gloo_transport.cpp.
  void sleep_on_one(std::chrono::steady_clock::time_point deadline);
  void hand_to_waiter(std::shared_ptr<PendingOp> op);  // mutex_ held
  void waiter_main(Waiter* w);
  /// Takes a finished operation's result from Gloo and reports it to `c`.
  void report(PendingOp& op, Completion& c);
  void close_connections(const std::string& reason) noexcept;
  std::string failure_reason() const;

  std::chrono::milliseconds timeout_;
  /// Bound on Gloo's own waits. Gloo poisons the whole context when such a
  /// wait expires, so it is only a backstop, far beyond the operation timeout
  /// the executor enforces (and cancels at); a finished operation's wait returns at once.
  std::chrono::milliseconds backstop_;
  std::vector<std::string> peer_address_;  ///< address each rank's Gloo device listens on
  std::vector<bool> same_host_;
  void connect_watched(const std::shared_ptr<Store>& store);  // see gloo_transport.cpp
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::shared_ptr<gloo::transport::tcp::Context> tcp_context_;  ///< our buffers are built on it

  // Operations inside Gloo (driving thread only): by completion, and those no
  // completion thread watches, in posting order.
  std::unordered_map<const Completion*, std::shared_ptr<PendingOp>> pending_;
  std::vector<std::shared_ptr<PendingOp>> unwatched_;

  // Completion threads, what they saw finish, and the sleeping driving thread (all guarded by mutex_).
  mutable std::mutex mutex_;
  std::condition_variable progress_cv_;  ///< signalled when finished_ grows or on interrupt()
  std::vector<std::shared_ptr<PendingOp>> finished_;
  std::vector<std::unique_ptr<Waiter>> waiters_;
  std::vector<Waiter*> idle_;
  WatchedBuffer* foreground_ = nullptr;  ///< the buffer the driving thread sleeps on
  bool interrupted_ = false;
  bool stopping_ = false;
  std::string failed_reason_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> has_finished_{false};

  // Messages to self (driving thread only): Gloo has no pair to self.
  std::deque<SelfMessage> self_sends_;
  std::deque<SelfMessage> self_recvs_;
};

}  // namespace gloo_detail
}  // namespace comm
