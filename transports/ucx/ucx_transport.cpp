// UCX transport: setup, tagged send/receive, progress, waiting, cancel, shutdown.
// See ucx_transport.hpp for the design; ucx_links.cpp for endpoints, link
// kinds and peer failure.
#include "transports/ucx/ucx_transport.hpp"

#include "core/builtin_transports.hpp"
#include "util/c_locale.hpp"

#include "util/log.hpp"

#include <comm/version.hpp>

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <new>
#include <sstream>
#include <string_view>

namespace comm {
namespace ucx {
namespace {

using Clock = std::chrono::steady_clock;

// wait() polls this long before sleeping on the event fd. Waking a sleeper
// takes tens of µs (eventfd + scheduler; more on a busy machine), and once it
// exceeds the spin, two ranks in a ping-pong settle into sleeping on every
// message: with a 20 µs spin a 2-rank 8 B all-reduce over shm took a median
// 95 µs here, each side sleeping in turn. The spin is paid only when there is
// nothing to do, and is short against the 250 ms sleeps that follow.
constexpr auto kSpin = std::chrono::microseconds(100);
// After this much of the spin, each poll also yields the CPU: on a machine
// with more runnable processes than cores, the peer we wait for may need it
// (2-rank 8 B sendrecv over tcp on a loaded 2-core VM: 115 µs without the
// yield, 23 µs with it). 10 µs leaves a tcp hop (~4 µs) undisturbed.
constexpr auto kSpinAlone = std::chrono::microseconds(10);
// How long cancel() lets an in-flight send finish on its own before closing
// the endpoint (UCX 1.13 cannot cancel send requests).
constexpr auto kSendCancelGrace = std::chrono::milliseconds(50);
constexpr auto kRecvCancelGrace = std::chrono::seconds(1);
// Keepalive period (see setup()) and the longest wait() sleeps without
// progressing: UCX runs keepalive from ucp_worker_progress, not from a timer.
constexpr const char* kKeepalive = "1s";
constexpr auto kMaxSleep = std::chrono::milliseconds(250);

std::string hex(std::uint64_t v) {
  std::ostringstream os = util::c_ostream();
  os << "0x" << std::hex << v;
  return os.str();
}

[[noreturn]] void fail_setup(const char* call, ucs_status_t status) {
  throw Error(ErrorCode::transport_failure,
              std::string("ucx transport: ") + call + " failed: " + ucs_status_string(status) +
                  "; check UCX_TLS and UCX_NET_DEVICES (ucx_info -d lists the usable devices)");
}

// True when UCX_TLS leaves the shared-memory (mm) transports on. Setting
// MM_ERROR_HANDLING when they are off makes UCX warn about an unused setting.
bool shm_transports_enabled() {
  const char* env = std::getenv("UCX_TLS");
  if (env == nullptr || *env == '\0') return true;
  std::string_view tls(env);
  const bool exclude = tls.front() == '^';
  if (exclude) tls.remove_prefix(1);
  bool named = false;
  while (!tls.empty()) {
    const auto comma = tls.find(',');
    const std::string_view name = tls.substr(0, comma);
    named = named || name == "all" || name == "sm" || name == "shm" || name == "mm" ||
            name == "sysv" || name == "posix" || name == "xpmem";
    if (exclude && (name == "sm" || name == "shm" || name == "mm")) return false;
    tls = comma == std::string_view::npos ? std::string_view{} : tls.substr(comma + 1);
  }
  return exclude || named;
}

struct ConfigDeleter {
  void operator()(ucp_config_t* c) const noexcept { ucp_config_release(c); }
};

}  // namespace

UcxTransport::UcxTransport(const TransportInit& init) : TransportBase("ucx", init) {
  if (size_ < 1 || rank_ < 0 || rank_ >= size_)
    throw Error(ErrorCode::invalid_argument, "ucx transport: rank " + std::to_string(rank_) +
                                                 " is outside a group of " + std::to_string(size_));
  if (size_ > (1 << kRankBits))
    throw Error(ErrorCode::unsupported,
                "ucx transport: " + std::to_string(size_) + " ranks requested, at most " +
                    std::to_string(1 << kRankBits) +
                    " fit in the tag bits above comm::kTagBits; split the group");
  if (!init.store)
    throw Error(ErrorCode::invalid_argument, "ucx transport: TransportInit::store is null; "
                                             "ranks exchange worker addresses through it");
  try {
    setup();
    connect(init);
  } catch (...) {
    shutdown();
    throw;
  }
}

UcxTransport::~UcxTransport() { shutdown(); }

void UcxTransport::setup() {
  ucp_config_t* raw = nullptr;
  // Reads UCX_TLS, UCX_NET_DEVICES and every other UCX_* variable the user set.
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &raw); s != UCS_OK)
    fail_setup("ucp_config_read", s);
  std::unique_ptr<ucp_config_t, ConfigDeleter> config(raw);
  // Peer-failure error handling silently disables the shared-memory
  // transports in UCX 1.13 unless they are told to support it; without this
  // same-host ranks fall back to TCP (10 µs instead of 0.65 µs). A user's own
  // UCX_MM_ERROR_HANDLING still wins.
  if (std::getenv("UCX_MM_ERROR_HANDLING") == nullptr && shm_transports_enabled()) {
    if (ucs_status_t s = ucp_config_modify(config.get(), "MM_ERROR_HANDLING", "y"); s != UCS_OK)
      COMM_WARN("ucx: cannot enable MM_ERROR_HANDLING (" << ucs_status_string(s)
                                                          << "); same-host ranks may use tcp");
  }

  // UCX probes idle endpoints every 20 s by default, and a peer that dies
  // while we only wait to receive from it (no traffic to it) is noticed only
  // by such a probe. We promise failure within seconds: probe every second.
  // A user's own UCX_KEEPALIVE_INTERVAL still wins.
  if (std::getenv("UCX_KEEPALIVE_INTERVAL") == nullptr) {
    if (ucs_status_t s = ucp_config_modify(config.get(), "KEEPALIVE_INTERVAL", kKeepalive); s != UCS_OK)
      COMM_WARN("ucx: cannot set KEEPALIVE_INTERVAL (" << ucs_status_string(s)
                                                        << "); dead peers may go unnoticed for 20 s");
  }

  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE |
                      UCP_PARAM_FIELD_REQUEST_INIT |
                      UCP_PARAM_FIELD_TAG_SENDER_MASK | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.request_size = sizeof(PendingOp);
  params.request_init = &UcxTransport::request_init;
  params.tag_sender_mask = kSenderMask;
  params.mt_workers_shared = 0;
  params.estimated_num_eps = static_cast<std::size_t>(size_);
  if (ucs_status_t s = ucp_init(&params, config.get(), &context_); s != UCS_OK)
    fail_setup("ucp_init", s);

  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // One thread drives a transport; interrupt() uses ucp_worker_signal, which
  // UCX documents as safe from any thread even in single-thread mode.
  wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
  if (ucs_status_t s = ucp_worker_create(context_, &wparams, &worker_); s != UCS_OK)
    fail_setup("ucp_worker_create", s);
  if (ucs_status_t s = ucp_worker_get_efd(worker_, &event_fd_); s != UCS_OK)
    fail_setup("ucp_worker_get_efd", s);
}

TransportCaps UcxTransport::caps() const noexcept {
  // Debian's UCX has no CUDA support; we never register device memory.
  return TransportCaps{.host_memory = true, .cuda_memory = false, .stream_ordered = false, .can_block = true,
                       .peer_failure_detection = true};
}

LinkInfo UcxTransport::link(int peer) const {
  check_peer("link", peer);
  return peers_[static_cast<std::size_t>(peer)].link;
}

void UcxTransport::isend(int peer, std::uint64_t tag, const void* data, std::size_t bytes,
                         Completion& c) {
  Peer* p = begin_post(c, peer, tag, data, bytes, true);
  if (p == nullptr) return;
  ucp_request_param_t prm = callback_param();
  prm.cb.send = &UcxTransport::send_callback;
  end_post(ucp_tag_send_nbx(p->ep, data, bytes, wire_tag(rank_, tag), &prm), bytes);
}

void UcxTransport::irecv(int peer, std::uint64_t tag, void* data, std::size_t bytes,
                         Completion& c) {
  Peer* p = begin_post(c, peer, tag, data, bytes, false);
  if (p == nullptr) return;
  ucp_request_param_t prm = callback_param();
  prm.cb.recv = &UcxTransport::recv_callback;
  // UCX 1.13 does not report the length of a receive that completes in place
  // (recv_info stays unwritten), so take an already-arrived message through
  // probe + msg_recv, whose probe gives its length; otherwise post normally.
  // A probe costs one unexpected-queue lookup, which the receive would do anyway.
  // Posted even when the peer is dead: what it sent before dying may already
  // be here, and that receive still succeeds.
  const std::uint64_t wtag = wire_tag(peer, tag);
  ucp_tag_recv_info_t info{};
  info.length = bytes;
  void* ret = nullptr;
  if (ucp_tag_message_h msg = ucp_tag_probe_nb(worker_, wtag, kFullMask, 1, &info))
    ret = ucp_tag_msg_recv_nbx(worker_, data, bytes, msg, &prm);
  else
    ret = ucp_tag_recv_nbx(worker_, data, bytes, wtag, kFullMask, &prm);
  end_post(ret, info.length);
  if (p->dead && !posted_done_ && UCS_PTR_IS_PTR(ret) && ret != nullptr) {
    // Not satisfied by what had arrived: nothing more will come. (A receive
    // matched to a rendezvous of the dead peer cannot be cancelled, hence detach.)
    detach(static_cast<PendingOp*>(ret), ErrorCode::peer_failed, peer_failure(peer));
    ucp_request_cancel(worker_, ret);
  }
}

void UcxTransport::request_init(void* request) {
  new (request) PendingOp();
}

Peer* UcxTransport::begin_post(Completion& c, int peer, std::uint64_t tag, const void* data, std::size_t bytes,
                              bool is_send) {
  check_p2p_args(is_send ? "isend" : "irecv", peer, tag, data, bytes);
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  posting_.state = PendingOp::State::idle;
  posting_.is_send = is_send;
  posting_.peer = peer;
  posting_.completion = &c;
  posting_.tag = tag;
  posting_.bytes = bytes;
  posted_done_ = false;
  // A send to a dead peer fails; a receive from one is still posted (what it
  // sent before dying may be here). Nothing goes to or comes from a closed one.
  const ucs_status_t refused =
      (is_send && p.dead) ? UCS_ERR_CONNECTION_RESET : (p.closed ? UCS_ERR_CANCELED : UCS_OK);
  if (refused == UCS_OK) return &p;
  finish(posting_, c, refused, 0);
  posting_.completion = nullptr;
  return nullptr;
}

ucp_request_param_t UcxTransport::callback_param() noexcept {
  ucp_request_param_t prm;
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  prm.user_data = this;
  return prm;
}

// `ret` is what ucp_*_nbx returned: NULL (done in place; UCX calls no
// callback then), an error status, or a request still in flight.
void UcxTransport::end_post(void* ret, std::size_t length) noexcept {
  Completion* c = posting_.completion;
  posting_.completion = nullptr;  // no longer being posted
  if (posted_done_) return;       // its callback already ran inside the call
  if (!UCS_PTR_IS_PTR(ret) || ret == nullptr) {
    finish(posting_, *c, UCS_PTR_STATUS(ret), length);
    return;
  }
  auto* op = static_cast<PendingOp*>(ret);
  *op = posting_;
  op->completion = c;
  op->state = PendingOp::State::tracked;
  Peer& p = peers_[static_cast<std::size_t>(op->peer)];
  op->prev = nullptr;
  op->next = p.pending;
  if (p.pending) p.pending->prev = op;
  p.pending = op;
}

void UcxTransport::untrack(PendingOp* op) noexcept {
  Peer& p = peers_[static_cast<std::size_t>(op->peer)];
  if (op->prev) op->prev->next = op->next;
  else p.pending = op->next;
  if (op->next) op->next->prev = op->prev;
  op->prev = op->next = nullptr;
}

void UcxTransport::send_callback(void* request, ucs_status_t status, void* user_data) {
  static_cast<UcxTransport*>(user_data)->completed(request, status, 0);
}

void UcxTransport::recv_callback(void* request, ucs_status_t status,
                                 const ucp_tag_recv_info_t* info, void* user_data) {
  static_cast<UcxTransport*>(user_data)->completed(request, status, info ? info->length : 0);
}

void UcxTransport::completed(void* request, ucs_status_t status, std::size_t length) noexcept {
  auto* op = static_cast<PendingOp*>(request);
  switch (op->state) {
    case PendingOp::State::tracked:
      untrack(op);
      finish(*op, *op->completion, status, op->is_send ? op->bytes : length);
      break;
    case PendingOp::State::detached:  // its Completion was failed already
      break;
    case PendingOp::State::idle:  // the op being posted, finishing inside ucp_*_nbx
      if (posting_.completion == nullptr) break;  // not ours (UCX gave us no such request)
      posted_done_ = true;
      finish(posting_, *posting_.completion, status, posting_.is_send ? posting_.bytes : length);
      break;
  }
  op->state = PendingOp::State::idle;
  op->completion = nullptr;
  ucp_request_free(request);
}

void UcxTransport::detach(PendingOp* op, ErrorCode code, const std::string& why, int cause) noexcept {
  untrack(op);
  op->state = PendingOp::State::detached;
  fail_op(*op->completion, code, [&] { return describe(*op) + ": " + why; }, cause == op->peer ? -1 : cause);
  op->completion = nullptr;
  changed_ = true;
}

// Fills `c` from a UCX status; `length` is what a receive got (or the sender's
// size when truncated, if UCX told).
void UcxTransport::finish(const PendingOp& op, Completion& c, ucs_status_t status,
                          std::size_t length) noexcept {
  changed_ = true;
  if (status == UCS_OK) {
    c.complete(op.is_send ? op.bytes : length);
    return;
  }
  const Peer& p = peers_[static_cast<std::size_t>(op.peer)];
  if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    fail_op(c, ErrorCode::mismatch, [&] {
      std::string msg = describe(op) + ": the message ";
      msg += length > op.bytes ? "is " + std::to_string(length) + " B" : "is longer";
      return msg + " but the receive holds " + std::to_string(op.bytes) +
             " B (message sizes differ between sender and receiver)";
    });
  } else if (p.dead || is_peer_error(status)) {
    fail_op(c, ErrorCode::peer_failed, [&] {
      return describe(op) + ": " +
             (p.dead ? peer_failure(blame(op.peer))
                     : "rank " + std::to_string(op.peer) + " is unreachable (UCX: " +
                           ucs_status_string(status) + ")");
    }, p.dead && blame(op.peer) != op.peer ? blame(op.peer) : -1);
  } else if (status == UCS_ERR_CANCELED && swept_for_ >= 0) {
    fail_op(c, ErrorCode::peer_failed, [&] { return describe(op) + ": " + peer_failure(swept_for_); }, swept_for_);
  } else if (status == UCS_ERR_CANCELED) {
    fail_op(c, ErrorCode::aborted, [&] {
      return describe(op) + (p.closed ? ": " + peer_failure(op.peer) : ": cancelled");
    });
  } else {
    fail_op(c, ErrorCode::transport_failure,
            [&] { return describe(op) + ": UCX reported " + ucs_status_string(status); });
  }
}

std::string UcxTransport::describe(const PendingOp& op) const {
  std::string s = op.is_send ? "ucx send to rank " : "ucx recv from rank ";
  s += std::to_string(op.peer) + " (tag " + hex(op.tag) + ", " + (op.is_send ? "" : "up to ") +
       std::to_string(op.bytes) + " B)";
  return s;
}

bool UcxTransport::progress() {
  ucp_worker_progress(worker_);
  if (peer_died_) fail_dead_peers();
  if (sweep_at_ != Clock::time_point{} && Clock::now() >= sweep_at_) sweep();
  if (control_request_ == nullptr) post_control_recv();
  const bool c = changed_;
  changed_ = false;
  return c;
}

void UcxTransport::wait(Clock::time_point deadline) {
  if (changed_ || peer_died_) return;
  if (sweep_at_ != Clock::time_point{}) deadline = std::min(deadline, sweep_at_);
  const auto start = Clock::now();
  const auto spin_end = std::min(deadline, start + kSpin);
  const auto yield_after = start + kSpinAlone;
  for (auto now = start; now < spin_end; now = Clock::now()) {
    if (ucp_worker_progress(worker_) != 0 && (changed_ || peer_died_)) return;
    if (now >= yield_after) sched_yield();
  }
  // Arming fails with BUSY while events are queued; the caller then progresses.
  if (ucp_worker_arm(worker_) != UCS_OK) return;
  const auto left = std::min<Clock::duration>(deadline - Clock::now(), kMaxSleep);
  if (left <= Clock::duration::zero()) return;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  pollfd pfd{event_fd_, POLLIN, 0};
  // EINTR or a timeout simply return: wait() may return early.
  ::ppoll(&pfd, 1, &ts, nullptr);
}

void UcxTransport::interrupt() noexcept {
  if (worker_) ucp_worker_signal(worker_);
}

PendingOp* UcxTransport::find(const Completion& c) noexcept {
  for (Peer& p : peers_)
    for (PendingOp* op = p.pending; op; op = op->next)
      if (op->completion == &c) return op;
  return nullptr;
}

bool UcxTransport::progress_until_finished(const Completion& c, Clock::duration budget) noexcept {
  const auto end = Clock::now() + budget;
  while (find(c) != nullptr) {
    if (Clock::now() >= end) return false;
    ucp_worker_progress(worker_);
    if (peer_died_) fail_dead_peers();
  }
  return true;
}

void UcxTransport::cancel(Completion& c) noexcept { withdraw(c, kRecvCancelGrace); }

// Ends a pending op so that UCX no longer touches its buffer when this
// returns: a receive not yet matched is cancelled; one matched to a
// rendezvous, or a send still in flight after `grace`, only goes with its
// endpoint (force-closed; the peer becomes unusable).
void UcxTransport::withdraw(Completion& c, Clock::duration grace) noexcept {
  PendingOp* op = find(c);
  if (op == nullptr) return;  // already finished: c is done or failed
  if (!op->is_send) {
    ucp_request_cancel(worker_, op);
    if (progress_until_finished(c, grace)) return;
  } else if (progress_until_finished(c, std::min<Clock::duration>(grace, kSendCancelGrace))) {
    return;
  }
  // Still in flight: a send waiting for a rendezvous or a receive already
  // matched to one. UCX 1.13 offers no way to withdraw those except closing
  // the endpoint, which purges its requests; the peer becomes unusable.
  op = find(c);
  if (op == nullptr) return;
  withdraw_endpoint(peers_[static_cast<std::size_t>(op->peer)]);
  if (progress_until_finished(c, kRecvCancelGrace)) return;
  if ((op = find(c)) != nullptr) {
    if (swept_for_ >= 0) detach(op, ErrorCode::peer_failed, peer_failure(swept_for_), swept_for_);
    else detach(op, ErrorCode::aborted, "cancelled while UCX still held it");
  }
}

void UcxTransport::shutdown() noexcept {
  if (worker_) {
    // A death seen but not yet handled: tell the others (obituaries) before
    // our goodbye, or they would blame our departure.
    if (peer_died_) fail_dead_peers();
    // Nobody may be told about an op after we are gone: fail what is pending.
    for (Peer& p : peers_) {
      while (PendingOp* op = p.pending) {
        detach(op, ErrorCode::aborted, "transport destroyed while the operation was pending");
        // UCX may still read a send's buffer, or land a matched rendezvous
        // in a receive's: only a forced close of the endpoint stops it.
        p.closed = true;
        if (!op->is_send) ucp_request_cancel(worker_, op);
      }
    }
    closing_ = true;
    send_control(goodbye());
    close_endpoints();
    // Control messages nobody will take (goodbyes of peers closing after us)
    // would make UCX warn about unmatched messages when the worker goes.
    if (control_request_ != nullptr) ucp_request_cancel(worker_, control_request_);
    std::uint64_t ignored = 0;
    while (take_arrived_control(ignored)) {}
    ucp_worker_destroy(worker_);
    worker_ = nullptr;
  }
  if (context_) {
    ucp_cleanup(context_);
    context_ = nullptr;
  }
}

}  // namespace ucx

void register_ucx_transport() {
  register_transport("ucx", [](const TransportInit& init) -> std::unique_ptr<Transport> {
    return std::make_unique<ucx::UcxTransport>(init);
  });
  register_transport_library({"ucx", "UCX", ucp_get_version_string(), "ucp_get_version_string()"});
}

}  // namespace comm
