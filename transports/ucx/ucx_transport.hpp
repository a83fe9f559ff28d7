#pragma once
// The UCX transport: one UCP context and one worker per communicator, tagged
// point-to-point messages over UCP tag matching, peer-failure detection through
// the endpoint error handler, and blocking waits on the worker's event fd.
//
// Why tag matching and not active messages: the executor posts every receive
// up front with its final buffer and exact size. UCP tag matching then lands
// eager data straight in that buffer, runs rendezvous (cma, RDMA) zero-copy
// into it for large messages, queues early arrivals itself and reports
// truncation; with active messages we would have to rebuild the matching
// queue, copy every early message once more, and drive rendezvous ourselves.
// On InfiniBand tag matching can also be offloaded to the adapter.
//
// Wire tags: UCX receives do not filter by source, so the sender's rank sits
// in the bits above comm::kTagBits and receives match all 64 bits. The top bit
// marks our own control messages (0 bytes, all in the tag):
//  - obituary: "rank X died", sent by a rank whose endpoint to X failed, so
//    that every survivor fails all its pending operations at once, even one
//    waiting only on live ranks that wait on X, and names X as the cause;
//  - goodbye: "I am closing", sent before a transport closes its endpoints,
//    so that a normal departure is not taken for a death; it also names the
//    death that made its sender leave, if any, as that rank's obituary may
//    arrive later (it comes from another rank, over another connection).

#include <comm/transport.hpp>

#include "core/transport_base.hpp"

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace comm {
namespace ucx {

class UcxTransport;

/// Tag layout: bit 63 control, bits 48..62 sender rank, bits 0..47 the executor's tag.
inline constexpr int kRankBits = 63 - kTagBits;  // 15 bits: up to 32768 ranks
inline constexpr std::uint64_t kUserTagMask = (std::uint64_t{1} << kTagBits) - 1;
inline constexpr std::uint64_t kControlBit = std::uint64_t{1} << 63;
inline constexpr std::uint64_t kSenderMask = ~kUserTagMask & ~kControlBit;
inline constexpr std::uint64_t kFullMask = ~std::uint64_t{0};
/// In a control tag's low bits: goodbye (below it: 1 + the rank whose death
/// made the sender leave, or 0); otherwise they hold the dead rank.
inline constexpr std::uint64_t kGoodbye = std::uint64_t{1} << (kTagBits - 1);

inline std::uint64_t wire_tag(int sender, std::uint64_t tag) noexcept {
  return (static_cast<std::uint64_t>(sender) << kTagBits) | tag;
}

/// Statuses with which UCX reports that the remote side is gone.
bool is_peer_error(ucs_status_t s) noexcept;

/// Completion::fail with a message built on the spot; if building it throws
/// (out of memory) the op still fails, without a message.
template <class MakeMessage>
void fail_op(Completion& c, ErrorCode code, MakeMessage&& make_message, int cause = -1) noexcept {
  try {
    c.fail(code, make_message(), cause);
  } catch (...) {
    c.fail(code, {}, cause);
  }
}

/// Our part of every UCX request (ucp_params_t::request_size): the Completion
/// it fills and its place in its peer's list of pending operations. Living in
/// the request keeps isend/irecv free of allocations.
struct PendingOp {
  /// idle: not ours yet (fresh, freed, or being posted right now);
  /// tracked: posted and listed under its peer; detached: already failed and
  /// unlisted, UCX still owns the request and frees it through its callback.
  enum class State : std::uint8_t { idle, tracked, detached };
  State state = State::idle;
  bool is_send = false;
  int peer = -1;
  Completion* completion = nullptr;
  PendingOp* prev = nullptr;
  PendingOp* next = nullptr;
  std::uint64_t tag = 0;
  std::size_t bytes = 0;
};

/// Everything we know about one peer. Held in a vector sized once, so the
/// address passed to UCX as the error-handler argument stays valid.
struct Peer {
  UcxTransport* owner = nullptr;
  int rank = -1;
  ucp_ep_h ep = nullptr;
  PendingOp* pending = nullptr;  ///< intrusive list of posted, unfinished ops
  std::string address;           ///< its UCX worker address
  bool same_host = false;
  bool dead = false;             ///< the endpoint reported an error
  bool dead_handled = false;     ///< its pending ops were failed
  bool closed = false;           ///< force-closed by us (to withdraw a send)
  int reported_by = -1;          ///< rank whose obituary told us it died; -1: UCX told us
  bool departed = false;         ///< said goodbye: it closed, it did not fail
  ucs_status_t error = UCS_OK;
  void* close_request = nullptr; ///< in flight while shutting down
  LinkInfo link;
};

/// The link to a peer from what UCX chose for the endpoint.
/// `lanes`: transport/device names of the endpoint's lanes ("sysv/memory",
/// "tcp/lo", "rc_mlx5/mlx5_0:1"), from lane_names().
LinkInfo classify_link(bool same_host, const std::vector<std::string>& lanes);
/// The distinct "transport/device" names of the lanes of `ep`, in lane order,
/// read from ucp_ep_print_info (UCX 1.13's ucp_ep_query does not report them).
std::vector<std::string> lane_names(ucp_ep_h ep);
/// Parses the text ucp_ep_print_info writes into the lane names (exposed for tests).
std::vector<std::string> parse_lane_names(const std::string& print_info);

class UcxTransport final : public TransportBase {
 public:
  explicit UcxTransport(const TransportInit& init);
  ~UcxTransport() override;

  COMM_TRANSPORT_POINT_TO_POINT_OVERRIDES;
  void withdraw(Completion& c, std::chrono::steady_clock::duration grace) noexcept;

 private:
  static void request_init(void* request);
  static void send_callback(void* request, ucs_status_t status, void* user_data);
  static void recv_callback(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                            void* user_data);
  static void endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  void setup();
  void connect(const TransportInit& init);
  void shutdown() noexcept;
  /// Checks the arguments (throws invalid_argument) and starts posting c: the
  /// peer, or null when it cannot take the operation (c has then failed).
  Peer* begin_post(Completion& c, int peer, std::uint64_t tag, const void* data, std::size_t bytes, bool is_send);
  /// Parameters with this transport as user data; the caller sets the callback.
  ucp_request_param_t callback_param() noexcept;
  void end_post(void* ret, std::size_t length) noexcept;
  void completed(void* request, ucs_status_t status, std::size_t length) noexcept;
  void untrack(PendingOp* op) noexcept;
  void detach(PendingOp* op, ErrorCode code, const std::string& why, int cause = -1) noexcept;
  void finish(const PendingOp& op, Completion& c, ucs_status_t status,
              std::size_t length) noexcept;
  void fail_dead_peers() noexcept;
  void sweep() noexcept;
  void post_control_recv() noexcept;
  static void control_callback(void* request, ucs_status_t status,
                               const ucp_tag_recv_info_t* info, void* user_data);
  void control(std::uint64_t sender_tag) noexcept;
  /// Takes one control message that has already arrived, by probe (UCX 1.13
  /// tells whose message it was only to a probe); false when there is none.
  bool take_arrived_control(std::uint64_t& sender_tag) noexcept;
  std::uint64_t goodbye() const noexcept;
  void send_control(Peer& q, std::uint64_t what) noexcept;
  void send_control(std::uint64_t what) noexcept;
  ucs_status_t create_endpoint(Peer& p, ucp_ep_h* ep) noexcept;
  void close_endpoint(ucp_ep_h ep, bool force) noexcept;
  void withdraw_endpoint(Peer& p) noexcept;
  void close_endpoints() noexcept;
  PendingOp* find(const Completion& c) noexcept;
  bool progress_until_finished(const Completion& c,
                               std::chrono::steady_clock::duration budget) noexcept;
  std::string describe(const PendingOp& op) const;
  std::string peer_failure(int peer) const;
  /// The rank to name for a failure with `peer`: a dead rank rather than one
  /// that left (probably because of that death).
  int blame(int peer) const noexcept;

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  std::vector<Peer> peers_;
  bool changed_ = false;        ///< a Completion changed state since the last progress()
  bool peer_died_ = false;      ///< some peer is dead but its ops are not failed yet
  bool closing_ = false;        ///< shutting down: no new control receive
  /// After a death: when every op still pending fails (see sweep()); zero: never.
  std::chrono::steady_clock::time_point sweep_at_{};
  int swept_for_ = -1;  ///< while sweep() withdraws ops: the dead rank they fail for
  void* control_request_ = nullptr;  ///< the standing receive for control messages
  // The op being posted: UCX may run its callback before ucp_*_nbx returns
  // (a truncated rendezvous, an endpoint error), while its request is not yet
  // tracked; the callback then finishes it from here and sets posted_done_.
  PendingOp posting_;
  bool posted_done_ = false;
};

}  // namespace ucx
}  // namespace comm
