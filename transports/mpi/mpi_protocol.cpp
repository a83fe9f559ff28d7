// Point-to-point over MPI. comm's tags have 48 bits and MPI_TAG_UB may be as
// small as 32767, so comm's tags never become MPI tags. Every message starts
// as a control message on one MPI tag (kControlTag) whose header carries the
// comm tag and size; the receiver matches headers against its posted receives
// itself, per (peer, comm tag) in order, which is exact for any tag. Small
// messages travel inside their header (one copy on each side); large ones are
// announced (rts), the receiver posts MPI_Irecv straight into the user's
// buffer and answers (cts), and only then does the sender post the payload,
// on an MPI tag derived from the message number. So a send MPI still holds
// is always one the peer is ready for, and a receive MPI holds is always one
// a peer has announced: cancelling before that point is exact.
//
// This file: control messages (building and parsing), matching them to posted
// receives, the payload handshake, and progress.

#include "mpi_protocol.hpp"

#include "util/log.hpp"

#include <climits>
#include <cstring>

namespace comm::mpi_detail {

void MpiTransport::send_control(int peer, const Header& h, const void* payload, std::size_t payload_bytes, Op* op) {
  std::vector<std::byte> msg = take_buffer(sizeof h + payload_bytes);
  std::memcpy(msg.data(), &h, sizeof h);
  if (payload_bytes) std::memcpy(msg.data() + sizeof h, payload, payload_bytes);
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = MPI_Isend(msg.data(), static_cast<int>(msg.size()), MPI_BYTE, peer, kControlTag, comm_, &req);
  if (rc != MPI_SUCCESS) return fail_mpi(op, rc, "MPI_Isend of a control message to rank " + std::to_string(peer));
  requests_.push_back(req);
  pending_.push_back(Pending{nullptr, std::move(msg)});
}

void MpiTransport::post_payload(Op& op, bool is_send, int tag) {
  // The sender's part count decides the split, so ranks need not agree on max_part_.
  const std::size_t total = op.is_send ? op.bytes : op.received;
  const std::size_t each = part_bytes(total, op.parts);
  for (std::uint32_t p = 0; p < op.parts; ++p) {
    const std::size_t offset = static_cast<std::size_t>(p) * each;
    const int n = static_cast<int>(std::min(each, total - offset));
    MPI_Request req = MPI_REQUEST_NULL;
    const int rc = is_send ? MPI_Isend(op.data + offset, n, MPI_BYTE, op.peer, tag, comm_, &req)
                           : MPI_Irecv(op.data + offset, n, MPI_BYTE, op.peer, tag, comm_, &req);
    if (rc != MPI_SUCCESS) return fail_mpi(&op, rc, is_send ? "MPI_Isend of a payload" : "MPI_Irecv of a payload");
    requests_.push_back(req);
    pending_.push_back(Pending{&op, {}});
    ++op.parts_left;
  }
}

void MpiTransport::post_ring(std::size_t slot) {
  const int rc = MPI_Irecv(ring_[slot].data(), static_cast<int>(kSlotBytes), MPI_BYTE, MPI_ANY_SOURCE, kControlTag,
                           comm_, &ring_requests_[slot]);
  if (rc != MPI_SUCCESS) {
    ring_requests_[slot] = MPI_REQUEST_NULL;
    fail_mpi(nullptr, rc, "MPI_Irecv of control messages");
  }
}

// ---- matching ------------------------------------------------------------------

void MpiTransport::on_control(int source, const std::byte* msg, std::size_t len) {
  Header h;
  if (len < sizeof h || source < 0 || source >= size_) {
    mark_failed("malformed control message (" + std::to_string(len) + " B) from rank " + std::to_string(source));
    return;
  }
  std::memcpy(&h, msg, sizeof h);
  if (h.kind == kEager && len == sizeof h + h.bytes) return on_eager(source, h, msg + sizeof h);
  if (h.kind == kRts && len == sizeof h) return on_rts(source, h);
  if ((h.kind == kCts || h.kind == kCtsRefused) && len == sizeof h) return on_cts(source, h, h.kind == kCtsRefused);
  mark_failed("malformed control message (kind " + tag_text(h.kind) + ", " + std::to_string(len) + " B) from rank " +
              std::to_string(source));
}

void MpiTransport::on_eager(int source, const Header& h, const std::byte* payload) {
  const Key key{source, h.tag};
  if (auto it = posted_.find(key); it != posted_.end()) {
    Op* op = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) posted_.erase(it);
    deliver_eager(*op, payload, h.bytes);
    return;
  }
  unexpected_[key].push_back(Unexpected{h, std::vector<std::byte>(payload, payload + h.bytes)});
}

void MpiTransport::on_rts(int source, const Header& h) {
  const Key key{source, h.tag};
  if (auto it = posted_.find(key); it != posted_.end()) {
    Op* op = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) posted_.erase(it);
    accept_rts(*op, h.id, h.parts, h.bytes);
    return;
  }
  unexpected_[key].push_back(Unexpected{h, {}});
}

bool MpiTransport::deliver_eager(Op& op, const std::byte* payload, std::size_t bytes) {
  if (bytes > op.bytes) {
    finish_op(op, false, ErrorCode::mismatch,
              "rank " + std::to_string(op.peer) + " sent " + std::to_string(bytes) + " B with tag " + tag_text(op.tag) +
                  " to rank " + std::to_string(rank_) + ", whose receive holds " + std::to_string(op.bytes) + " B");
    return false;
  }
  if (bytes) std::memcpy(op.data, payload, bytes);
  op.received = bytes;
  finish_op(op, true, ErrorCode::internal, {});
  return true;
}

void MpiTransport::accept_rts(Op& op, std::uint64_t id, std::uint32_t parts, std::size_t bytes) {
  op.matched = true;
  op.id = id;
  op.received = bytes;
  op.parts = parts;
  if (parts == 0 || part_bytes(bytes, parts) > static_cast<std::size_t>(INT_MAX)) {
    mark_failed("malformed announcement from rank " + std::to_string(op.peer) + ": " + std::to_string(bytes) +
                " B in " + std::to_string(parts) + " parts");
    return;
  }
  if (bytes > op.bytes) {
    send_control(op.peer, Header{kCtsRefused, 0, op.tag, bytes, id}, nullptr, 0, nullptr);
    finish_op(op, false, ErrorCode::mismatch,
              "rank " + std::to_string(op.peer) + " sent " + std::to_string(bytes) + " B with tag " + tag_text(op.tag) +
                  " to rank " + std::to_string(rank_) + ", whose receive holds " + std::to_string(op.bytes) + " B");
    return;
  }
  // The receive is posted before the sender hears it may send.
  post_payload(op, false, payload_tag(id));
  if (failed_.load(std::memory_order_acquire)) return;
  send_control(op.peer, Header{kCts, parts, op.tag, bytes, id}, nullptr, 0, &op);
}

void MpiTransport::on_cts(int source, const Header& h, bool refused) {
  const auto it = awaiting_cts_.find({source, h.id});
  if (it == awaiting_cts_.end()) return;  // the send was cancelled meanwhile
  Op& op = *it->second;
  awaiting_cts_.erase(it);
  if (refused) {
    finish_op(op, false, ErrorCode::mismatch,
              "rank " + std::to_string(rank_) + " sent " + std::to_string(op.bytes) + " B with tag " +
                  tag_text(op.tag) + " to rank " + std::to_string(source) + ", whose receive is smaller");
    return;
  }
  post_payload(op, true, payload_tag(op.id));
}

void MpiTransport::finish_op(Op& op, bool ok, ErrorCode code, std::string message) {
  Completion* c = op.c;
  if (op.parts_left > 0)
    for (Pending& p : pending_)
      if (p.op == &op) p.op = nullptr;
  const std::size_t bytes = op.is_send ? op.bytes : op.received;
  if (op.is_send) awaiting_cts_.erase({op.peer, op.id});
  ops_.erase(c);  // destroys op (a no-op for an op never stored)
  if (ok)
    c->complete(bytes);
  else
    c->fail(code, std::move(message));
}

void MpiTransport::fail_mpi(Op* op, int rc, std::string_view what) {
  const std::string msg = std::string(what) + " failed on rank " + std::to_string(rank_) + ": " + error_string(rc);
  mark_failed(msg);
  if (op && ops_.count(op->c)) finish_op(*op, false, ErrorCode::transport_failure, msg);
}

// ---- progress -----------------------------------------------------------------

bool MpiTransport::drain_ring() {
  bool any = false;
  while (!failed_.load(std::memory_order_relaxed)) {
    MPI_Request& req = ring_requests_[ring_head_];
    int done = 0;
    MPI_Status st;
    const int rc = MPI_Test(&req, &done, &st);
    if (rc != MPI_SUCCESS) {
      fail_mpi(nullptr, rc, "MPI_Test of control messages");
      break;
    }
    if (!done) break;
    int len = 0;
    MPI_Get_count(&st, MPI_BYTE, &len);
    on_control(st.MPI_SOURCE, ring_[ring_head_].data(), static_cast<std::size_t>(len));
    post_ring(ring_head_);
    ring_head_ = (ring_head_ + 1) % kRingSlots;
    any = true;
  }
  return any;
}

bool MpiTransport::drain_requests() {
  if (requests_.empty()) return false;
  thread_local std::vector<int> indices;
  thread_local std::vector<MPI_Status> statuses;
  indices.resize(requests_.size());
  statuses.resize(requests_.size());
  int count = 0;
  const int rc = MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &count, indices.data(),
                              statuses.data());
  if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
    fail_mpi(nullptr, rc, "MPI_Testsome");
    return true;
  }
  if (count == MPI_UNDEFINED) count = 0;
  for (int k = 0; k < count; ++k) {
    Pending& p = pending_[static_cast<std::size_t>(indices[static_cast<std::size_t>(k)])];
    const int err = rc == MPI_ERR_IN_STATUS ? statuses[static_cast<std::size_t>(k)].MPI_ERROR : MPI_SUCCESS;
    if (err != MPI_SUCCESS) {
      fail_mpi(p.op, err, p.op ? describe(*p.op) : std::string("a control message"));
    } else if (p.op && --p.op->parts_left == 0) {
      finish_op(*p.op, true, ErrorCode::internal, {});
    }
    if (!p.buffer.empty() && spare_buffers_.size() < kSpareBuffers && p.buffer.capacity() <= kSlotBytes)
      spare_buffers_.push_back(std::move(p.buffer));
    p.op = nullptr;
  }
  // Completed (and withdrawn) requests are MPI_REQUEST_NULL: drop them, keeping the order.
  std::size_t out = 0;
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    if (out != i) {
      requests_[out] = requests_[i];
      pending_[out] = std::move(pending_[i]);
    }
    ++out;
  }
  requests_.resize(out);
  pending_.resize(out);
  return count > 0;
}

bool MpiTransport::progress() {
  if (shut_down_) return false;
  CallLock lock;
  bool moved = drain_ring();
  moved = drain_requests() || moved;
  if (failed_.load(std::memory_order_relaxed) && !ops_.empty()) {
    fail_pending();
    moved = true;
  }
  return moved;
}

void MpiTransport::fail_pending() {
  // Nothing more will arrive through a failed transport: fail what waits now
  // rather than at each operation's deadline. MPI may still hold payloads.
  for (Pending& p : pending_) p.op = nullptr;
  posted_.clear();
  awaiting_cts_.clear();
  std::vector<std::unique_ptr<Op>> ops;
  for (auto& entry : ops_) ops.push_back(std::move(entry.second));
  ops_.clear();
  for (const auto& op : ops)
    op->c->fail(ErrorCode::transport_failure, describe(*op) + ": the mpi transport on rank " + std::to_string(rank_) +
                                                  " failed: " + failed_reason_);
}

}  // namespace comm::mpi_detail
