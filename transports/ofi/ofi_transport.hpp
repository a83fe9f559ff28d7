#pragma once
// The `ofi` transport: libfabric reliable-datagram (FI_EP_RDM) endpoints with
// tagged messages. One provider per communicator, chosen identically on every
// rank (see README.md). Receives are directed (filtered by the sender's
// fi_addr); data progress is manual, so progress() polls the completion queue.
//
// Each posted operation owns an Op record whose first member is the
// fi_context2 libfabric asks for (FI_CONTEXT/FI_CONTEXT2 mode); the caller's
// Completion is reached through it and is never touched after it completes,
// fails or cancel() returns, nor is its buffer (see close_endpoint).

#include <comm/transport.hpp>

#include "core/transport_base.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace comm {

void register_ofi_transport();

namespace ofi {

using Clock = std::chrono::steady_clock;

struct InfoDeleter {
  void operator()(fi_info* info) const noexcept { fi_freeinfo(info); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

/// A rank's process, as published in the store: same-host ranks (the peer
/// table says which) with equal `pidns` see each other's processes, which is
/// how a dead same-host peer is noticed.
struct ProcessIdentity {
  std::string pidns;  ///< /proc/self/ns/pid link text
  long pid = 0;
  unsigned long long start_ticks = 0;  ///< field 22 of /proc/<pid>/stat: guards against pid reuse
  std::string provider;                ///< provider named by COMM_OFI_PROVIDER/FI_PROVIDER, "" if automatic
  std::vector<std::string> providers;  ///< usable providers (automatic selection only)
};

ProcessIdentity this_process();
std::string encode(const ProcessIdentity& id);
ProcessIdentity decode_identity(const std::string& text, int rank);
/// False when `id` (on this host and pid namespace) has exited or is a zombie.
bool process_alive(const ProcessIdentity& id);

/// Hints for a tagged, directed-receive RDM endpoint; `provider` may be "".
InfoPtr make_hints(const std::string& provider);
/// Distinct provider names fi_getinfo offers for make_hints(""), in its order.
std::vector<std::string> offered_providers();
/// The link this provider gives between two ranks (`same_host` of the pair).
LinkInfo provider_link(const fi_info& info, bool same_host);
/// True if `provider` offers FI_HMEM at all; fi_getinfo does not say which
/// device interfaces (CUDA, ZE, ...) it supports. For the info log only.
bool offers_hmem(const std::string& provider);
/// Usable tag bits by the provider's mem_tag_format.
int tag_bits(const fi_info& info);
/// The name of rank `rank`'s shm region (a file in /dev/shm) in process
/// `pid`: "comm-ofi-<pid>-<rank>-<n>" (n counts the process's endpoints).
std::string shm_region_name(long pid, int rank);

/// Ends the process when its driving thread has been inside a provider call
/// far longer than any call takes and cannot come back: libfabric 1.17's shm
/// takes a process-shared spin lock in the peer's region for every send (and
/// in its own to progress); a rank killed while holding one leaves every
/// later taker spinning forever, and no thread stuck in a spin lock can be
/// unwound. So after `stuck_after` inside one call, if `diagnose` names a
/// dead same-host peer, or after `give_up_after` regardless (a frozen peer
/// holding it), the reason is printed and the process exits with code 70:
/// a way out the communicator cannot offer from inside the call. An exit
/// that skips the endpoint's close leaves its region in /dev/shm, so
/// `before_exit` runs first (it removes the files this process and its dead
/// peers left: without commrun nobody else does).
class ProviderWatchdog {
 public:
  ProviderWatchdog(std::function<std::string()> diagnose, std::function<void()> before_exit, int rank,
                   std::chrono::milliseconds stuck_after, std::chrono::milliseconds give_up_after);
  ~ProviderWatchdog();
  ProviderWatchdog(const ProviderWatchdog&) = delete;
  ProviderWatchdog& operator=(const ProviderWatchdog&) = delete;
  /// Around every call into the provider (driving thread only; not nested).
  void enter() noexcept;
  void leave() noexcept { entered_ns_.store(0, std::memory_order_release); }

 private:
  void run();
  std::function<std::string()> diagnose_;
  std::function<void()> before_exit_;
  int rank_;
  std::chrono::milliseconds stuck_after_, give_up_after_;
  std::atomic<std::int64_t> entered_ns_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

/// Marks one call into the provider for the watchdog (if any).
class InProvider {
 public:
  explicit InProvider(ProviderWatchdog* w) noexcept : w_(w) {
    if (w_) w_->enter();
  }
  ~InProvider() {
    if (w_) w_->leave();
  }
  InProvider(const InProvider&) = delete;
  InProvider& operator=(const InProvider&) = delete;

 private:
  ProviderWatchdog* w_;
};

/// True for errno values that mean the peer or the connection to it is gone.
bool is_connection_error(int err) noexcept;

/// How often pending operations are checked for dead peers (and how long an
/// operation must be pending before its peer is checked).
inline constexpr std::chrono::milliseconds kLivenessInterval{1000};
/// How long cancel (and failing a dead peer's operations) polls for the
/// provider to hand an operation back. Receives come back at once on every
/// provider we know; rxm cannot withdraw a send, so waiting long for one only
/// delays the failure path.
inline constexpr std::chrono::milliseconds kCancelRecvBound{500};
/// A liveness probe the provider keeps refusing (-FI_EAGAIN) this long marks
/// its peer dead (see send_probe).
inline constexpr std::chrono::milliseconds kProbeRefusalLimit{2000};
inline constexpr std::chrono::milliseconds kCancelSendBound{20};

/// One posted (or backlogged) operation. ctx must stay the first member:
/// completions hand back its address.
struct Op {
  fi_context2 ctx{};
  enum class Kind : std::uint8_t { send, recv, probe_send, probe_recv } kind = Kind::send;
  enum class State : std::uint8_t { backlog, posted, cancelling } state = State::backlog;
  Completion* c = nullptr;  ///< null for probes and for ops whose caller gave up (orphans)
  int peer = -1;
  std::uint64_t tag = 0;
  void* buf = nullptr;
  std::size_t bytes = 0;
  Clock::time_point posted_at{};
};

class OfiTransport final : public TransportBase {
 public:
  explicit OfiTransport(const TransportInit& init);
  ~OfiTransport() override;

  COMM_TRANSPORT_POINT_TO_POINT_OVERRIDES;

 private:
  // set-up (ofi_transport.cpp)
  void choose_provider();
  void open_endpoint();
  void exchange_names(Store* store);  // null when size is 1
  void release() noexcept;         // the provider's objects and the wake fd
  void close_provider() noexcept;  // the provider's objects only

  // data path
  void check_post(int peer, std::uint64_t tag, std::size_t bytes, const char* what) const;
  void submit(Op* op);
  ssize_t post(Op* op) noexcept;
  bool drain_backlog();
  void unbacklog(Op* op) noexcept;
  bool poll_cq();
  void on_success(Op* op, std::size_t len);
  void on_error(const fi_cq_err_entry& err);
  void finish(Op* op) noexcept;  // returns op to the pool
  void complete(Op* op, std::size_t bytes) noexcept;
  void fail(Op* op, ErrorCode code, std::string message, int cause = -1) noexcept;
  Op* new_op(Op::Kind kind, int peer, std::uint64_t tag, void* buf, std::size_t bytes, Completion* c);
  std::string describe(const Op& op) const;

  // shm provider (ofi_shm.cpp)
  void check_shm_use();
  std::string dead_local_peers() const;
  void remove_regions_of(int peer) noexcept;
  void remove_dead_peers_regions() noexcept;
  void remove_regions_before_exit() noexcept;

  // failure detection (ofi_links.cpp)
  bool is_shm() const;
  bool blocking_wait_supported() const;
  bool detects_failures() const noexcept;
  std::string failure_detection_text() const;
  bool check_liveness(Clock::time_point now);
  void send_probe(int peer);
  void post_probe_recv();
  void fail_peer(int peer, const std::string& why);
  void withdraw(const std::vector<Op*>& ops);
  // The dead rank to blame for an op with `peer`: itself if dead, else the first dead one (-1: none).
  int dead_cause(int peer) const noexcept;
  std::string death_of(int peer) const;  // why `peer` is dead ("cancelled" for -1)
  void fail_all(ErrorCode code, const std::string& why);
  void close_endpoint(const std::string& why) noexcept;  // for ops the provider will not hand back
  bool poll_until_gone(Completion& c, Clock::duration bound) noexcept;

  std::chrono::milliseconds timeout_;
  std::vector<ProcessIdentity> procs_;
  std::shared_ptr<const PeerTable> peers_;
  std::vector<bool> same_host_;

  InfoPtr info_;
  std::string provider_;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  std::string own_name_;  // this endpoint's address as fi_getname gives it
  std::vector<fi_addr_t> addrs_;
  bool can_block_ = false;     // CQ has an fd wait object we may sleep on
  int cq_fd_ = -1;             // owned by libfabric
  int wake_fd_ = -1;           // eventfd we own; interrupt() writes it
  std::atomic<bool> interrupted_{false};
  std::uint64_t probe_tag_ = 0;  // 0: probes disabled (too few tag bits, or shm)
  char probe_byte_ = 0;          // probes carry no data; providers still want a valid address

  std::deque<Op> pool_;          // stable addresses
  std::vector<Op*> free_;
  std::deque<Op*> backlog_;      // ops the provider refused with -FI_EAGAIN, oldest first
  std::vector<std::size_t> backlogged_;  // per peer: how many of backlog_ are its
  std::vector<char> blocked_;            // drain_backlog scratch: peers refused in this pass
  std::unordered_map<Completion*, Op*> active_;
  std::vector<int> pending_per_peer_;
  std::vector<Op*> probe_in_flight_;
  std::vector<Clock::time_point> probe_refused_since_;  // first -FI_EAGAIN of a run of refused probes
  std::vector<char> reached_;  // per peer: a message to or from it has completed (a connection existed)
  Op* probe_recv_ = nullptr;
  std::vector<std::string> peer_failed_;  // non-empty: why the peer is considered dead
  int first_dead_ = -1;                   // the first peer found dead: it fails every operation
  std::string broken_;                    // non-empty: the CQ itself failed; nothing can be posted
  Clock::time_point next_liveness_{};
  std::unique_ptr<ProviderWatchdog> watchdog_;  // shm across processes only
};

}  // namespace ofi
}  // namespace comm
