#include "shm_p2p.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <sys/random.h>
#include <sys/uio.h>

namespace comm::shm {
namespace {

constexpr std::size_t kHeaderBytes = sizeof(RecordHeader);
constexpr std::uint64_t kStateMask = 0xff;
constexpr auto kGrace = std::chrono::milliseconds(500);
constexpr auto kCheckEvery = std::chrono::milliseconds(1);

std::size_t record_size(std::size_t payload) { return (kHeaderBytes + payload + kLine - 1) / kLine * kLine; }
Rendezvous state_of(std::uint64_t word) { return static_cast<Rendezvous>(word & kStateMask); }
std::uint64_t word(std::uint64_t ticket, Rendezvous s) { return (ticket & ~kStateMask) | static_cast<std::uint8_t>(s); }
unsigned slot_of(std::uint64_t ticket) { return static_cast<unsigned>(ticket & kStateMask); }

}  // namespace

P2p::P2p(const Segment& segment, Sync& sync, int rank, P2pOptions options)
    : seg_(segment), sync_(sync), rank_(rank), n_(segment.layout().nranks), opts_(options) {
  const Layout& l = seg_.layout();
  ring_bytes_ = l.ring_bytes;
  max_payload_ = ring_bytes_ / 4 - kHeaderBytes;
  eager_max_ = std::min<std::size_t>(max_payload_, 16 * 1024);
  peers_.resize(static_cast<std::size_t>(n_));
  constexpr std::size_t kRvOffset = sizeof(RingControl);
  const std::size_t data_offset = l.pair_stride - l.ring_bytes;
  for (int p = 0; p < n_; ++p) {
    if (p == rank_) continue;
    Peer& peer = peers_[static_cast<std::size_t>(p)];
    std::byte* out = seg_.base() + l.pair_offset(rank_, p);
    std::byte* in = seg_.base() + l.pair_offset(p, rank_);
    peer.out = reinterpret_cast<RingControl*>(out);
    peer.in = reinterpret_cast<RingControl*>(in);
    peer.rv_out = reinterpret_cast<std::atomic<std::uint64_t>*>(out + kRvOffset);
    peer.rv_in = reinterpret_cast<std::atomic<std::uint64_t>*>(in + kRvOffset);
    peer.out_data = out + data_offset;
    peer.in_data = in + data_offset;
    peer.out_head = peer.out->head.load(std::memory_order_relaxed);
    peer.out_tail_seen = peer.out->tail.load(std::memory_order_relaxed);
    peer.in_tail = peer.in->tail.load(std::memory_order_relaxed);
  }
  // The probe word lives in this process's memory; peers read it with process_vm_readv.
  if (::getrandom(&probe_value_, sizeof probe_value_, 0) != static_cast<ssize_t>(sizeof probe_value_))
    probe_value_ = 0x9e3779b97f4a7c15ULL ^ static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(this));
  RankControl& me = seg_.control(rank_);
  me.probe_address = reinterpret_cast<std::uintptr_t>(&probe_value_);
  me.probe_value = probe_value_;
  last_check_ = Clock::now();
}

void P2p::probe_peers() {
  for (int p = 0; p < n_; ++p) {
    if (p == rank_) continue;
    Peer& peer = peers_[static_cast<std::size_t>(p)];
    const RankControl& c = seg_.control(p);
    peer.pid = static_cast<int>(c.pid);
    if (!opts_.cma) continue;
    std::uint64_t value = 0;
    iovec local{&value, sizeof value};
    iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(c.probe_address)), sizeof value};
    // The value check also guards against a pid that names another process
    // (the peer in another pid namespace).
    peer.cma = ::process_vm_readv(peer.pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof value) &&
               value == c.probe_value;
  }
}

std::string P2p::mismatch(int from, std::uint64_t tag, std::size_t sent, std::size_t room) const {
  return "shm: rank " + std::to_string(from) + " sent " + std::to_string(sent) + " B (tag " + std::to_string(tag) +
         "), rank " + std::to_string(rank_) + " posted a receive of at most " + std::to_string(room) +
         " B (counts differ across ranks)";
}

// ---- sending ----------------------------------------------------------------

bool P2p::try_write(Peer& p, const RecordHeader& h, const std::byte* payload, std::size_t payload_bytes) {
  const std::size_t size = record_size(payload_bytes);
  const std::size_t mask = ring_bytes_ - 1;
  auto space = [&] { return ring_bytes_ - static_cast<std::size_t>(p.out_head - p.out_tail_seen); };
  std::size_t pos = static_cast<std::size_t>(p.out_head) & mask;
  const std::size_t pad = ring_bytes_ - pos < size ? ring_bytes_ - pos : 0;
  if (space() < pad + size) {
    p.out_tail_seen = p.out->tail.load(std::memory_order_acquire);
    if (space() < pad + size) return false;
  }
  if (pad) {
    auto* ph = reinterpret_cast<RecordHeader*>(p.out_data + pos);
    ph->kind = RecordKind::pad;
    ph->payload = static_cast<std::uint32_t>(pad - kHeaderBytes);
    p.out_head += pad;
    pos = 0;
  }
  std::memcpy(p.out_data + pos, &h, kHeaderBytes);
  if (payload_bytes) std::memcpy(p.out_data + pos + kHeaderBytes, payload, payload_bytes);
  p.out_head += size;
  return true;
}

int P2p::free_rendezvous_slot(const Peer& p) const {
  for (unsigned s = 0; s < kRendezvousSlots; ++s)
    if (!p.outstanding[s].used) return static_cast<int>(s);
  return -1;
}

// Moves queued records into the ring, in order, as space and rendezvous slots allow.
bool P2p::push(int to) {
  Peer& p = peers_[static_cast<std::size_t>(to)];
  bool moved = false;
  const std::uint64_t head_before = p.out_head;
  while (!p.queue.empty()) {
    Send& s = p.queue.front();
    RecordHeader h;
    if (s.kind == RecordKind::eager) {
      h.kind = RecordKind::eager;
      h.payload = static_cast<std::uint32_t>(s.bytes);
      h.tag = s.tag;
      if (!try_write(p, h, s.data, s.bytes)) break;
      s.c->complete(s.bytes);
    } else if (s.kind == RecordKind::rts) {
      const int slot = free_rendezvous_slot(p);
      if (slot < 0) break;
      const std::uint64_t ticket = (++p.generation << 8) | static_cast<unsigned>(slot);
      h.kind = RecordKind::rts;
      h.tag = s.tag;
      h.total = s.bytes;
      h.address = reinterpret_cast<std::uintptr_t>(s.data);
      h.ticket = ticket;
      p.rv_out[slot].store(word(ticket, Rendezvous::posted), std::memory_order_release);
      if (!try_write(p, h, nullptr, 0)) {
        p.rv_out[slot].store(word(ticket, Rendezvous::free), std::memory_order_relaxed);
        --p.generation;
        break;
      }
      p.outstanding[static_cast<unsigned>(slot)] = {s.c, s.data, s.bytes, ticket, true};
    } else if (s.kind == RecordKind::data) {
      bool full = false;
      while (s.sent < s.bytes) {
        const std::size_t frag = std::min(max_payload_, s.bytes - s.sent);
        h.kind = RecordKind::data;
        h.payload = static_cast<std::uint32_t>(frag);
        h.tag = s.ticket;
        h.total = s.sent;
        if (!try_write(p, h, s.data + s.sent, frag)) {
          full = true;
          break;
        }
        s.sent += frag;
      }
      if (full) break;
      if (s.c) s.c->complete(s.bytes);
    } else {  // cancel
      h.kind = RecordKind::cancel;
      h.tag = s.ticket;
      if (!try_write(p, h, nullptr, 0)) break;
    }
    p.queue.pop_front();
    moved = true;
  }
  if (p.out_head != head_before) {
    p.out->head.store(p.out_head, std::memory_order_release);
    sync_.wake(to);
    moved = true;
  }
  return moved;
}

void P2p::isend(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Completion& c) {
  if (peer == rank_) return self_send(tag, data, bytes, c);
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  if (p.failed) {
    c.fail(ErrorCode::peer_failed, "shm: rank " + std::to_string(peer) + " is gone; cannot send to it");
    return;
  }
  const auto* d = static_cast<const std::byte*>(data);
  p.queue.push_back({bytes <= eager_max_ ? RecordKind::eager : RecordKind::rts, tag, d, bytes, 0, &c, 0});
  if (p.queue.size() == 1) push(peer);
}

void P2p::self_send(std::uint64_t tag, const void* data, std::size_t bytes, Completion& c) {
  for (auto it = self_recvs_.begin(); it != self_recvs_.end(); ++it) {
    if (it->tag != tag) continue;
    const Posted r = *it;
    self_recvs_.erase(it);
    if (bytes > r.bytes) {
      r.c->fail(ErrorCode::mismatch, mismatch(rank_, tag, bytes, r.bytes));
    } else {
      if (bytes) std::memcpy(r.data, data, bytes);
      r.c->complete(bytes);
    }
    c.complete(bytes);
    return;
  }
  self_sends_.push_back({tag, static_cast<const std::byte*>(data), bytes, &c});
}

void P2p::self_recv(std::uint64_t tag, void* data, std::size_t bytes, Completion& c) {
  for (auto it = self_sends_.begin(); it != self_sends_.end(); ++it) {
    if (it->tag != tag) continue;
    const SelfSend s = *it;
    self_sends_.erase(it);
    if (s.bytes > bytes) {
      c.fail(ErrorCode::mismatch, mismatch(rank_, tag, s.bytes, bytes));
    } else {
      if (s.bytes) std::memcpy(data, s.data, s.bytes);
      c.complete(s.bytes);
    }
    s.c->complete(s.bytes);
    return;
  }
  self_recvs_.push_back({tag, static_cast<std::byte*>(data), bytes, &c});
}

// Rendezvous sends whose receiver has read the data (done) or wants it streamed (clear to send).
bool P2p::poll_rendezvous(int to) {
  Peer& p = peers_[static_cast<std::size_t>(to)];
  bool moved = false;
  for (unsigned s = 0; s < kRendezvousSlots; ++s) {
    Outstanding& o = p.outstanding[s];
    if (!o.used) continue;
    const std::uint64_t w = p.rv_out[s].load(std::memory_order_acquire);
    if ((w & ~kStateMask) != (o.ticket & ~kStateMask)) continue;
    const Rendezvous st = state_of(w);
    if (st == Rendezvous::done) {
      o.c->complete(o.bytes);
    } else if (st == Rendezvous::clear_to_send) {
      p.queue.push_front({RecordKind::data, 0, o.data, o.bytes, 0, o.c, o.ticket});
    } else {
      continue;
    }
    p.rv_out[s].store(word(o.ticket, Rendezvous::free), std::memory_order_relaxed);
    o = {};
    moved = true;
  }
  return moved;
}

// ---- receiving --------------------------------------------------------------

void P2p::irecv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Completion& c) {
  if (peer == rank_) return self_recv(tag, data, bytes, c);
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  const Posted r{tag, static_cast<std::byte*>(data), bytes, &c};
  for (auto it = p.unexpected.begin(); it != p.unexpected.end(); ++it) {
    if (it->tag != tag) continue;
    Unexpected u = std::move(*it);
    p.unexpected.erase(it);
    if (u.kind == RecordKind::eager)
      deliver_eager(peer, r, u.payload.data(), u.payload.size());
    else
      start_rendezvous_recv(peer, r, u.total, u.address, u.ticket);
    return;
  }
  if (p.failed) {
    c.fail(ErrorCode::peer_failed, "shm: rank " + std::to_string(peer) + " is gone; nothing more will come from it");
    return;
  }
  p.posted.push_back(r);
  drain(peer);  // the message may already be in the ring
}

void P2p::deliver_eager(int from, const Posted& r, const std::byte* payload, std::size_t bytes) {
  if (bytes > r.bytes) {
    r.c->fail(ErrorCode::mismatch, mismatch(from, r.tag, bytes, r.bytes));
    return;
  }
  if (bytes) std::memcpy(r.data, payload, bytes);
  r.c->complete(bytes);
}

void P2p::start_rendezvous_recv(int from, const Posted& r, std::uint64_t total, std::uint64_t address,
                                std::uint64_t ticket) {
  Peer& p = peers_[static_cast<std::size_t>(from)];
  std::atomic<std::uint64_t>& rv = p.rv_in[slot_of(ticket)];
  const Rendezvous next = p.cma && total <= r.bytes ? Rendezvous::reading : Rendezvous::clear_to_send;
  std::uint64_t expected = word(ticket, Rendezvous::posted);
  if (total > r.bytes) {
    // Refuse it: the sender's word goes to done so its send completes; our receive fails.
    if (rv.compare_exchange_strong(expected, word(ticket, Rendezvous::done), std::memory_order_acq_rel))
      sync_.wake(from);
    r.c->fail(ErrorCode::mismatch, mismatch(from, r.tag, static_cast<std::size_t>(total), r.bytes));
    return;
  }
  if (!rv.compare_exchange_strong(expected, word(ticket, next), std::memory_order_acq_rel)) {
    r.c->fail(ErrorCode::aborted, "shm: rank " + std::to_string(from) + " withdrew its send (tag " +
                                      std::to_string(r.tag) + ") before this rank received it");
    return;
  }
  if (next == Rendezvous::reading) {
    iovec local{r.data, static_cast<std::size_t>(total)};
    iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), static_cast<std::size_t>(total)};
    const ssize_t got = total ? ::process_vm_readv(p.pid, &local, 1, &remote, 1, 0) : 0;
    const int err = errno;
    // The sender may have taken the send back meanwhile (cancel_outstanding:
    // this rank stopped mid-read): then what was read may be anything.
    std::uint64_t reading = word(ticket, Rendezvous::reading);
    const bool kept = rv.compare_exchange_strong(reading, word(ticket, Rendezvous::done), std::memory_order_acq_rel);
    sync_.wake(from);
    if (!kept)
      r.c->fail(ErrorCode::aborted, "shm: rank " + std::to_string(from) + " withdrew its send (tag " +
                                        std::to_string(r.tag) + ") while this rank read it, after waiting " +
                                        "for the read to end");
    else if (got != static_cast<ssize_t>(total))
      r.c->fail(ErrorCode::transport_failure,
                "shm: reading " + std::to_string(total) + " B from rank " + std::to_string(from) +
                    "'s memory failed: " + (got < 0 ? std::strerror(err) : "short read"));
    else
      r.c->complete(static_cast<std::size_t>(total));
    return;
  }
  Stream& st = p.streams[slot_of(ticket)];
  st = {ticket, r.data, static_cast<std::size_t>(total), 0, r.c, true};
  sync_.wake(from);
  if (total == 0) {
    st.active = false;
    r.c->complete(0);
  }
}

void P2p::on_record(int from, const RecordHeader& h, const std::byte* payload) {
  Peer& p = peers_[static_cast<std::size_t>(from)];
  if (h.kind == RecordKind::eager || h.kind == RecordKind::rts) {
    for (auto it = p.posted.begin(); it != p.posted.end(); ++it) {
      if (it->tag != h.tag) continue;
      const Posted r = *it;
      p.posted.erase(it);
      if (h.kind == RecordKind::eager)
        deliver_eager(from, r, payload, h.payload);
      else
        start_rendezvous_recv(from, r, h.total, h.address, h.ticket);
      return;
    }
    Unexpected u{h.tag, h.kind, {}, h.total, h.address, h.ticket};
    if (h.kind == RecordKind::eager) u.payload.assign(payload, payload + h.payload);
    p.unexpected.push_back(std::move(u));
    return;
  }
  Stream& st = p.streams[slot_of(h.tag)];
  if (!st.active || st.ticket != h.tag) return;  // a stream we cancelled, already forgotten
  if (h.kind == RecordKind::cancel) {
    if (st.c)
      st.c->fail(ErrorCode::aborted, "shm: rank " + std::to_string(from) + " withdrew its send while it was streaming");
    st = {};
    return;
  }
  if (st.c) std::memcpy(st.data + h.total, payload, h.payload);
  st.received += h.payload;
  if (st.received >= st.total) {
    if (st.c) st.c->complete(st.total);
    st = {};
  }
}

bool P2p::drain(int from) {
  Peer& p = peers_[static_cast<std::size_t>(from)];
  const std::uint64_t head = p.in->head.load(std::memory_order_acquire);
  if (head == p.in_tail) return false;
  const std::size_t mask = ring_bytes_ - 1;
  while (p.in_tail != head) {
    const std::byte* rec = p.in_data + (static_cast<std::size_t>(p.in_tail) & mask);
    RecordHeader h;
    std::memcpy(&h, rec, kHeaderBytes);
    if (h.kind != RecordKind::pad) on_record(from, h, rec + kHeaderBytes);
    p.in_tail += record_size(h.payload);
  }
  p.in->tail.store(p.in_tail, std::memory_order_release);
  sync_.wake(from);  // it may be waiting for ring space
  return true;
}

// ---- progress, cancel, failure ----------------------------------------------

bool P2p::progress() {
  bool moved = false;
  for (int p = 0; p < n_; ++p) {
    if (p == rank_) continue;
    moved = drain(p) || moved;
    moved = poll_rendezvous(p) || moved;
    if (!peers_[static_cast<std::size_t>(p)].queue.empty()) moved = push(p) || moved;
  }
  const auto now = Clock::now();
  if (now - last_check_ >= kCheckEvery && pending()) {
    last_check_ = now;
    moved = check_peers() || moved;
  }
  return moved;
}

bool P2p::has_work() const noexcept {
  for (int q = 0; q < n_; ++q) {
    if (q == rank_) continue;
    const Peer& p = peers_[static_cast<std::size_t>(q)];
    if (p.in->head.load(std::memory_order_acquire) != p.in_tail) return true;
    if (!p.queue.empty() && p.out->tail.load(std::memory_order_acquire) != p.out_tail_seen) return true;
    for (unsigned s = 0; s < kRendezvousSlots; ++s) {
      const Outstanding& o = p.outstanding[s];
      if (o.used && state_of(p.rv_out[s].load(std::memory_order_acquire)) != Rendezvous::posted) return true;
    }
  }
  return false;
}

bool P2p::pending() const noexcept {
  for (int q = 0; q < n_; ++q) {
    if (q == rank_) continue;
    const Peer& p = peers_[static_cast<std::size_t>(q)];
    if (!p.posted.empty() || !p.queue.empty()) return true;
    for (const auto& o : p.outstanding)
      if (o.used) return true;
    for (const auto& s : p.streams)
      if (s.active && s.c) return true;
  }
  return false;
}

void P2p::fail_peer(int peer, ErrorCode code, const std::string& why) {
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  p.failed = true;
  for (auto& r : p.posted) r.c->fail(code, why);
  p.posted.clear();
  for (auto& s : p.queue)
    if (s.c && s.kind != RecordKind::cancel) s.c->fail(code, why);
  p.queue.clear();
  for (auto& o : p.outstanding)
    if (o.used) o.c->fail(code, why);
  p.outstanding.fill({});
  for (auto& s : p.streams)
    if (s.active && s.c) s.c->fail(code, why);
  p.streams.fill({});
}

bool P2p::check_peers() {
  bool failed_any = false;
  for (int q = 0; q < n_; ++q) {
    if (q == rank_ || peers_[static_cast<std::size_t>(q)].failed || seg_.alive(q)) continue;
    drain(q);  // what it sent before it went is still ours to read
    if (seg_.control(q).state.load(std::memory_order_acquire) != RankState::departed) {
      seg_.post_obituary(q, rank_);
      sync_.wake_sleepers();
    }
    fail_peer(q, ErrorCode::peer_failed,
              "shm: rank " + std::to_string(q) + " " + seg_.why_gone(q) + " while rank " + std::to_string(rank_) +
                  " had an operation pending with it");
    failed_any = true;
  }
  if (seg_.header().obituary.load(std::memory_order_acquire)) {
    const auto now = Clock::now();
    if (obituary_seen_ == Clock::time_point{}) obituary_seen_ = now;
    if (now - obituary_seen_ >= kGrace && pending()) {
      const std::string why = "shm: " + seg_.obituary() + ", so this operation cannot complete";
      for (int q = 0; q < n_; ++q)
        if (q != rank_ && !peers_[static_cast<std::size_t>(q)].failed) fail_peer(q, ErrorCode::peer_failed, why);
      failed_any = true;
    }
  }
  return failed_any;
}

void P2p::cancel(Completion& c) noexcept {
  if (!c.is_pending()) return;
  if (!cancel_queued(c)) cancel_outstanding(c);
}

bool P2p::cancel_queued(Completion& c) noexcept {
  auto gone = [&](const char* what) {
    c.fail(ErrorCode::aborted, std::string("shm: ") + what + " cancelled");
    return true;
  };
  for (auto it = self_recvs_.begin(); it != self_recvs_.end(); ++it)
    if (it->c == &c) {
      self_recvs_.erase(it);
      return gone("receive");
    }
  for (auto it = self_sends_.begin(); it != self_sends_.end(); ++it)
    if (it->c == &c) {
      self_sends_.erase(it);
      return gone("send");
    }
  for (int q = 0; q < n_; ++q) {
    if (q == rank_) continue;
    Peer& p = peers_[static_cast<std::size_t>(q)];
    for (auto it = p.posted.begin(); it != p.posted.end(); ++it)
      if (it->c == &c) {
        p.posted.erase(it);
        return gone("receive");
      }
    for (auto& s : p.streams)
      if (s.active && s.c == &c) {
        s.c = nullptr;  // keep draining its fragments, into nothing
        return gone("receive");
      }
    for (auto it = p.queue.begin(); it != p.queue.end(); ++it) {
      if (it->c != &c) continue;
      if (it->kind == RecordKind::data)  // the receiver waits for the stream: tell it none will come
        *it = {RecordKind::cancel, 0, nullptr, 0, 0, nullptr, it->ticket};
      else
        p.queue.erase(it);
      return gone("send");
    }
  }
  return false;
}

// How long a peer's read of `bytes` of this rank's memory may take: 100 ms,
// plus the bytes at 0.5 GB/s (one process_vm_readv copies at 2-10 GB/s here).
std::chrono::nanoseconds P2p::read_grace(std::size_t bytes) noexcept {
  return std::chrono::milliseconds(100) + std::chrono::nanoseconds(bytes * 2);
}

void P2p::cancel_outstanding(Completion& c) noexcept {
  for (int q = 0; q < n_; ++q) {
    if (q == rank_) continue;
    Peer& p = peers_[static_cast<std::size_t>(q)];
    for (unsigned s = 0; s < kRendezvousSlots; ++s) {
      Outstanding& o = p.outstanding[s];
      if (!o.used || o.c != &c) continue;
      std::uint64_t expected = word(o.ticket, Rendezvous::posted);
      if (!p.rv_out[s].compare_exchange_strong(expected, word(o.ticket, Rendezvous::cancelled))) {
        // The receiver is reading our buffer right now: it finishes within a
        // system call, or it died (its lock is gone), or it stopped (SIGSTOP,
        // a debugger) between taking the send and saying it is done. Past a
        // read's worth of time the send is taken back: the reader then finds
        // its word changed and discards what it read.
        const auto give_up = std::chrono::steady_clock::now() + read_grace(o.bytes);
        while (state_of(p.rv_out[s].load(std::memory_order_acquire)) == Rendezvous::reading && seg_.alive(q) &&
               std::chrono::steady_clock::now() < give_up)
          std::this_thread::yield();
        std::uint64_t reading = word(o.ticket, Rendezvous::reading);
        p.rv_out[s].compare_exchange_strong(reading, word(o.ticket, Rendezvous::cancelled));
        if (state_of(p.rv_out[s].load(std::memory_order_acquire)) == Rendezvous::clear_to_send)
          p.queue.push_front({RecordKind::cancel, 0, nullptr, 0, 0, nullptr, o.ticket});
      }
      o = {};
      c.fail(ErrorCode::aborted, "shm: send cancelled");
      return;
    }
  }
}

}  // namespace comm::shm
