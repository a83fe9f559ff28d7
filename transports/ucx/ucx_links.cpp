// UCX transport: endpoints and the health of peers. Connecting to every rank,
// what kind of link joins us (from the lanes UCX chose), noticing dead peers
// and telling the other ranks about them (obituaries).
#include "transports/ucx/ucx_transport.hpp"

#include "util/log.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string_view>

namespace comm::ucx {
namespace {

using Clock = std::chrono::steady_clock;

// How long closing an endpoint may take before we stop waiting for it.
constexpr auto kCloseBudget = std::chrono::seconds(2);
// Progress rounds that drain what a dead peer sent before it died.
constexpr int kDrainRounds = 1000;
// How long, after a death, ops with live peers may still complete: none. The
// communicator fails as a whole with its first dead peer (any op of a
// collective left pending would fail it anyway, only later and naming
// whichever live rank it waited on), so every op fails at once, naming it.
constexpr auto kDeathGrace = std::chrono::milliseconds(0);
// How long a swept receive may take to hand back its buffer before its
// endpoint is closed to withdraw it.
constexpr auto kSweepGrace = std::chrono::milliseconds(50);

// Default α (µs, 8 B half round trip) and β (GB/s, large one-way) per kind.
// shm and tcp: ucx_perftest tag_lat/tag_bw on the 2-core development VMs
// (TRANSPORT-NOTES.md). ib: not measured here (no adapter); nominal figures
// for an EDR (100 Gb/s = 12.5 GB/s line rate) ConnectX adapter with rc_mlx5,
// whose UCX tag latency is typically 1-2 µs; calibration (COMM_CALIBRATE=1)
// replaces all of these with measurements.
constexpr double kShmAlphaUs = 0.65, kShmBetaGbps = 7.5;
constexpr double kTcpAlphaUs = 10.0, kTcpBetaGbps = 3.0;
constexpr double kIbAlphaUs = 1.5, kIbBetaGbps = 12.0;

enum class LaneClass { shm, ib, tcp, other };

// UCX transport names (the part of a lane before '/') by the medium they use.
LaneClass classify_lane(const std::string& lane) {
  const std::string tl = lane.substr(0, lane.find('/'));
  static constexpr std::array<std::string_view, 6> shm = {"sysv", "posix", "xpmem",
                                                          "cma",  "knem",  "self"};
  if (std::find(shm.begin(), shm.end(), tl) != shm.end()) return LaneClass::shm;
  if (tl == "tcp") return LaneClass::tcp;
  // Verbs-based transports: rc, rc_verbs, rc_mlx5, ud, ud_verbs, ud_mlx5, dc_mlx5.
  if (tl.rfind("rc", 0) == 0 || tl.rfind("ud", 0) == 0 || tl.rfind("dc", 0) == 0)
    return LaneClass::ib;
  return LaneClass::other;
}

}  // namespace

std::vector<std::string> parse_lane_names(const std::string& text) {
  // A lane line reads "#  lane[0]:  3:sysv/memory.0 md[2]  -> md[2]/sysv/... am am_bw#0":
  // the token after "N:" is transport/device, then ".<path index>".
  std::vector<std::string> names;
  std::size_t pos = 0;
  while ((pos = text.find("lane[", pos)) != std::string::npos) {
    const auto colon = text.find("]:", pos);
    if (colon == std::string::npos) break;
    auto start = text.find_first_not_of(' ', colon + 2);
    const auto end = text.find_first_of(" \n", start);
    pos = colon + 2;
    if (start == std::string::npos || end == std::string::npos) break;
    std::string token = text.substr(start, end - start);
    if (const auto idx = token.find(':'); idx != std::string::npos) token.erase(0, idx + 1);
    if (const auto dot = token.rfind('.'); dot != std::string::npos &&
                                           dot > token.find('/') &&
                                           token.find_first_not_of("0123456789", dot + 1) ==
                                               std::string::npos)
      token.erase(dot);
    if (token.find('/') == std::string::npos) continue;
    if (std::find(names.begin(), names.end(), token) == names.end()) names.push_back(token);
  }
  return names;
}

std::vector<std::string> lane_names(ucp_ep_h ep) {
  char* buffer = nullptr;
  std::size_t size = 0;
  FILE* stream = open_memstream(&buffer, &size);
  if (stream == nullptr) return {};
  ucp_ep_print_info(ep, stream);
  std::fclose(stream);
  std::unique_ptr<char, decltype(&std::free)> owned(buffer, &std::free);
  return parse_lane_names(std::string(buffer, size));
}

LinkInfo classify_link(bool same_host, const std::vector<std::string>& lanes) {
  bool shm = false, ib = false, tcp = false;
  std::string detail = "ucx";
  for (const auto& lane : lanes) {
    detail += detail.size() == 3 ? " " : " + ";
    detail += lane;
    switch (classify_lane(lane)) {
      case LaneClass::shm: shm = true; break;
      case LaneClass::ib: ib = true; break;
      case LaneClass::tcp: tcp = true; break;
      case LaneClass::other: break;
    }
  }
  // The fastest medium among the lanes carries small messages: shared memory
  // beats RDMA beats sockets. Lanes we cannot name fall back to whether the
  // peer shares our host.
  if (shm || (!ib && !tcp && same_host)) {
    LinkInfo link{LinkKind::shm, kShmAlphaUs, kShmBetaGbps, detail};
    // UCX shm copies through the receiver's CPU (copy-out of the segment, or CMA reads).
    link.receiver_copies = true;
    return link;
  }
  if (ib) return LinkInfo{LinkKind::ib, kIbAlphaUs, kIbBetaGbps, detail};
  return LinkInfo{LinkKind::tcp, kTcpAlphaUs, kTcpBetaGbps, detail};
}


bool is_peer_error(ucs_status_t s) noexcept {
  const auto in = [s](ucs_status_t first, ucs_status_t last) { return s <= first && s >= last; };
  return s == UCS_ERR_CONNECTION_RESET || s == UCS_ERR_UNREACHABLE || s == UCS_ERR_NOT_CONNECTED ||
         s == UCS_ERR_REJECTED || s == UCS_ERR_IO_ERROR ||
         in(UCS_ERR_FIRST_ENDPOINT_FAILURE, UCS_ERR_LAST_ENDPOINT_FAILURE) ||
         in(UCS_ERR_FIRST_LINK_FAILURE, UCS_ERR_LAST_LINK_FAILURE);
}

void UcxTransport::connect(const TransportInit& init) {
  const auto timeout = init.config ? init.config->timeout : std::chrono::milliseconds(300'000);
  ucp_address_t* address = nullptr;
  std::size_t address_len = 0;
  if (ucs_status_t s = ucp_worker_get_address(worker_, &address, &address_len); s != UCS_OK)
    throw Error(ErrorCode::transport_failure,
                std::string("ucx transport: ucp_worker_get_address failed: ") + ucs_status_string(s));
  std::string mine(reinterpret_cast<const char*>(address), address_len);
  ucp_worker_release_address(worker_, address);
  init.store->set("ucx/addr/" + std::to_string(rank_), mine);

  peers_.resize(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    Peer& p = peers_[static_cast<std::size_t>(r)];
    p.owner = this;
    p.rank = r;
    const std::string value =
        r == rank_ ? mine : init.store->get("ucx/addr/" + std::to_string(r), timeout);
    if (value.empty())
      throw Error(ErrorCode::store_failure, "ucx transport: the store entry ucx/addr/" + std::to_string(r) +
                                                " is empty, not a UCX worker address; is another program "
                                                "using the same store prefix?");
    p.same_host = init.peers->same_host(rank_, r);
    p.address = value;
    if (ucs_status_t s = create_endpoint(p, &p.ep); s != UCS_OK)
      throw Error(ErrorCode::transport_failure,
                  "ucx transport: rank " + std::to_string(rank_) + " cannot create an endpoint to rank " +
                      std::to_string(r) + ": " + ucs_status_string(s) +
                      "; check that UCX_TLS/UCX_NET_DEVICES allow a path between the two hosts");
    const auto lanes = lane_names(p.ep);
    if (r == rank_) {
      p.link = LinkInfo{LinkKind::self, 0.1, 13.7, "ucx self"};
    } else {
      p.link = classify_link(p.same_host, lanes);
    }
    COMM_DEBUG("ucx: rank " << rank_ << " -> " << r << ": " << to_string(p.link.kind) << " ("
                            << p.link.detail << ")");
  }
  post_control_recv();
}

ucs_status_t UcxTransport::create_endpoint(Peer& p, ucp_ep_h* ep) noexcept {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(p.address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxTransport::endpoint_error;
  params.err_handler.arg = &p;
  return ucp_ep_create(worker_, &params, ep);
}

void UcxTransport::close_endpoint(ucp_ep_h ep, bool force) noexcept {
  ucp_request_param_t prm;
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  prm.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  void* req = ucp_ep_close_nbx(ep, &prm);
  if (!UCS_PTR_IS_PTR(req) || req == nullptr) return;
  const auto end = Clock::now() + kCloseBudget;
  while (ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < end)
    ucp_worker_progress(worker_);
  ucp_request_free(req);
}

void UcxTransport::withdraw_endpoint(Peer& p) noexcept {
  if (p.ep == nullptr) return;
  p.closed = true;
  close_endpoint(p.ep, true);
  p.ep = nullptr;
  // The peer may have matched the purged send and now waits for its data.
  // A goodbye on the old endpoint would have queued behind that send and
  // died with it, so send it on a fresh endpoint, flushed before closing.
  ucp_ep_h once = nullptr;
  if (create_endpoint(p, &once) != UCS_OK) return;
  ucp_request_param_t prm;
  prm.op_attr_mask = 0;
  void* req = ucp_tag_send_nbx(once, nullptr, 0, kControlBit | wire_tag(rank_, goodbye()), &prm);
  if (UCS_PTR_IS_PTR(req) && req != nullptr) ucp_request_free(req);
  close_endpoint(once, false);
}

void UcxTransport::close_endpoints() noexcept {
  // Flush-close live endpoints so the last eager sends reach their peers;
  // force-close failed ones and those with sends we abandoned.
  for (Peer& p : peers_) {
    if (p.ep == nullptr) continue;
    ucp_request_param_t prm;
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = (p.dead || p.closed) ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void* req = ucp_ep_close_nbx(p.ep, &prm);
    p.ep = nullptr;
    if (UCS_PTR_IS_PTR(req)) p.close_request = req;
  }
  const auto end = Clock::now() + kCloseBudget;
  for (Peer& p : peers_) {
    if (p.close_request == nullptr) continue;
    while (ucp_request_check_status(p.close_request) == UCS_INPROGRESS && Clock::now() < end)
      ucp_worker_progress(worker_);
    ucp_request_free(p.close_request);
    p.close_request = nullptr;
  }
}

int UcxTransport::blame(int peer) const noexcept {
  const Peer& p = peers_[static_cast<std::size_t>(peer)];
  if (!p.dead || !p.departed) return peer;
  for (const Peer& q : peers_)
    if (q.dead && !q.departed) return q.rank;
  return peer;
}

std::string UcxTransport::peer_failure(int peer) const {
  const Peer& p = peers_[static_cast<std::size_t>(peer)];
  const std::string who = "rank " + std::to_string(peer);
  if (!p.dead)
    return "the endpoint to " + who +
           " was closed to cancel a send UCX could not withdraw; the communicator cannot continue";
  if (p.departed)
    return who + " closed its connection to this rank (communicator destroyed, or a send withdrawn)"
                 " while this operation with it was pending";
  std::string s = who + " failed or became unreachable (";
  s += p.reported_by >= 0 ? "reported by rank " + std::to_string(p.reported_by)
                          : std::string("UCX: ") + ucs_status_string(p.error);
  return s + "); the communicator cannot continue";
}

void UcxTransport::endpoint_error(void* arg, ucp_ep_h, ucs_status_t status) {
  // Runs inside ucp_worker_progress: only record the failure here; the
  // pending ops are failed by fail_dead_peers() once progress has returned.
  auto* p = static_cast<Peer*>(arg);
  if (p->dead) return;
  p->dead = true;
  p->error = status;
  p->owner->peer_died_ = true;
  p->owner->changed_ = true;
  COMM_INFO("ucx: rank " << p->owner->rank_ << " lost rank " << p->rank << ": "
                         << ucs_status_string(status));
}

void UcxTransport::fail_dead_peers() noexcept {
  peer_died_ = false;
  // A peer's last messages may arrive in the same progress call that reported
  // its death (shm FIFO entries, bytes before a socket's EOF, its goodbye, an
  // obituary): let them land before failing what is left.
  for (int i = 0; i < kDrainRounds && ucp_worker_progress(worker_) != 0; ++i) {
  }
  // Deaths first: a rank that left because another died (its goodbye
  // follows the obituary it sent) must not take the blame.
  for (const bool departures : {false, true}) {
    for (Peer& p : peers_) {
      if (!p.dead || p.dead_handled || p.departed != departures) continue;
      p.dead_handled = true;
      std::string why;
      try {
        why = peer_failure(blame(p.rank));
      } catch (...) {
      }
      // UCX fails sends on a failed endpoint itself; receives are not bound
      // to an endpoint, so cancel them. Whatever is still listed fails here.
      const auto fail_all_of = [&](Peer& q) {
        while (PendingOp* op = q.pending) {
          detach(op, ErrorCode::peer_failed, why, blame(p.rank));
          if (!op->is_send) ucp_request_cancel(worker_, op);
        }
      };
      fail_all_of(p);
      if (p.departed) continue;  // it closed normally: only what involves it is lost
      if (p.reported_by < 0) send_control(static_cast<std::uint64_t>(p.rank));
      // A death ends the group's collectives: every other op fails too (sweep()).
      if (sweep_at_ == Clock::time_point{}) sweep_at_ = Clock::now() + kDeathGrace;
    }
  }
}

// Fails every op pending when a peer died (after kDeathGrace): a rank waiting
// only on live peers that themselves wait on the dead one would otherwise
// hang, and later name one of them. Ops with live peers are withdrawn, not
// just detached: a receive already matched to a rendezvous would still land
// in its buffer after the caller was told it failed.
void UcxTransport::sweep() noexcept {
  sweep_at_ = {};
  const Peer* dead = nullptr;
  for (const Peer& p : peers_)
    if (p.dead && !p.departed) {
      dead = &p;
      break;
    }
  if (dead == nullptr) return;
  std::vector<Completion*> pending;
  try {
    for (Peer& q : peers_)
      for (PendingOp* op = q.pending; op != nullptr; op = op->next) pending.push_back(op->completion);
  } catch (...) {
    return;  // out of memory: the ops fail at their timeout
  }
  // Once per death: what is posted afterwards (the survivors may still talk
  // to each other) runs normally.
  swept_for_ = dead->rank;
  for (Completion* c : pending) withdraw(*c, kSweepGrace);
  swept_for_ = -1;
}

// Control messages are 0-byte tag-only sends (see ucx_transport.hpp). One
// receive matching any of them stays posted; progress() reposts it.
void UcxTransport::post_control_recv() noexcept {
  if (control_request_ != nullptr || closing_ || worker_ == nullptr) return;
  // UCX 1.13 does not say whose message a receive completed in place took,
  // so take those already here by probe, which does.
  for (std::uint64_t sender_tag = 0; take_arrived_control(sender_tag);) control(sender_tag);
  ucp_request_param_t prm;
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  prm.cb.recv = &UcxTransport::control_callback;
  prm.user_data = this;
  void* req = ucp_tag_recv_nbx(worker_, nullptr, 0, kControlBit, kControlBit, &prm);
  if (UCS_PTR_IS_PTR(req) && req != nullptr) control_request_ = req;
}

bool UcxTransport::take_arrived_control(std::uint64_t& sender_tag) noexcept {
  ucp_tag_recv_info_t info{};
  ucp_tag_message_h msg = ucp_tag_probe_nb(worker_, kControlBit, kControlBit, 1, &info);
  if (msg == nullptr) return false;
  ucp_request_param_t prm;
  prm.op_attr_mask = 0;
  void* req = ucp_tag_msg_recv_nbx(worker_, nullptr, 0, msg, &prm);
  if (UCS_PTR_IS_PTR(req) && req != nullptr) ucp_request_free(req);
  sender_tag = info.sender_tag;
  return true;
}

void UcxTransport::control_callback(void* request, ucs_status_t status,
                                    const ucp_tag_recv_info_t* info, void* user_data) {
  auto* t = static_cast<UcxTransport*>(user_data);
  t->control_request_ = nullptr;
  if (status == UCS_OK && info != nullptr) t->control(info->sender_tag);
  ucp_request_free(request);
  // Repost at once: a goodbye right behind this message must be seen before
  // the connection error that follows it fails operations with its sender.
  if (status == UCS_OK) t->post_control_recv();
}

void UcxTransport::control(std::uint64_t sender_tag) noexcept {
  const auto sender = static_cast<int>((sender_tag & kSenderMask) >> kTagBits);
  const auto what = sender_tag & kUserTagMask;
  const auto mark = [&](std::uint64_t rank, bool departed) {
    if (rank >= static_cast<std::uint64_t>(size_) || static_cast<int>(rank) == rank_) return;
    Peer& p = peers_[static_cast<std::size_t>(rank)];
    if (p.dead) return;
    p.dead = true;
    p.departed = departed;
    if (!departed) p.reported_by = sender;
    peer_died_ = true;
    changed_ = true;
    COMM_INFO("ucx: rank " << rank_ << ": rank " << sender
                           << (departed ? " closed" : " reports rank " + std::to_string(rank) + " dead"));
  };
  if ((what & kGoodbye) == 0) {
    mark(what, false);
    return;
  }
  // A goodbye names the death that made its sender leave, if any: it may
  // overtake that rank's obituary, which comes from another rank.
  if (const auto cause = what & ~kGoodbye; cause != 0) mark(cause - 1, false);
  mark(static_cast<std::uint64_t>(sender), true);
}

std::uint64_t UcxTransport::goodbye() const noexcept {
  for (const Peer& p : peers_)
    if (p.dead && !p.departed) return kGoodbye | static_cast<std::uint64_t>(p.rank + 1);
  return kGoodbye;
}

// Sends `what` (a dead rank or kGoodbye) to `q`, or to every live peer,
// fire and forget: freeing a request early only drops its callback, and these
// have none.
void UcxTransport::send_control(Peer& q, std::uint64_t what) noexcept {
  if (q.rank == rank_ || q.dead || q.ep == nullptr) return;
  ucp_request_param_t prm;
  prm.op_attr_mask = 0;
  void* req = ucp_tag_send_nbx(q.ep, nullptr, 0, kControlBit | wire_tag(rank_, what), &prm);
  if (UCS_PTR_IS_PTR(req) && req != nullptr) ucp_request_free(req);
}

void UcxTransport::send_control(std::uint64_t what) noexcept {
  for (Peer& q : peers_)
    if (static_cast<std::uint64_t>(q.rank) != what) send_control(q, what);
}

}  // namespace comm::ucx
