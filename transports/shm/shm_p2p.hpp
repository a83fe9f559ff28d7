#pragma once
// Point-to-point messages through the segment, behind the Transport contract
// (tags, posting-order matching per (peer, tag), cancel, progress that never
// blocks).
//
// Every ordered pair (from, to) has an SPSC ring of 64-byte-aligned records
// (RecordHeader + payload; a record never wraps, a pad record fills the end).
// Small messages are one eager record: the send completes once copied into
// the ring, the receiver copies it into the posted buffer (or keeps it as
// unexpected). Larger messages take a rendezvous: the sender publishes one of
// its pair's rendezvous words ("posted") and an RTS record with its buffer's
// address; the matching receiver either reads the data straight out of the
// sender's memory with process_vm_readv (one copy; "reading" -> "done") when
// the cross-memory probe at start-up succeeded, or flips the word to "clear to
// send" and the sender streams the data through the ring in fragments that
// land straight in the posted buffer (two copies, pipelined). Either way no
// message is ever buffered twice and an unmatched large message costs nothing.
//
// Failure: a peer that died (its liveness lock is gone) or left fails the
// operations pending on it, naming it, and is recorded in the segment's
// obituary so that every other rank fails its pending operations as well
// (after a short grace for those whose own peers are alive).

#include "shm_segment.hpp"
#include "shm_sync.hpp"

#include <comm/transport.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace comm::shm {

enum class RecordKind : std::uint32_t { pad = 0, eager = 1, rts = 2, data = 3, cancel = 4 };

struct RecordHeader {
  RecordKind kind = RecordKind::pad;
  std::uint32_t payload = 0;  ///< bytes following this header in the record
  std::uint64_t tag = 0;      ///< eager/rts: the message tag; data/cancel: the rendezvous ticket
  std::uint64_t total = 0;    ///< rts: message bytes; data: offset of this fragment
  std::uint64_t address = 0;  ///< rts: the sender's buffer (for process_vm_readv)
  std::uint64_t ticket = 0;   ///< rts: rendezvous ticket (slot | generation << 8)
  std::uint64_t reserved[3] = {};
};
static_assert(sizeof(RecordHeader) == 64, "a record header is one cache line");

/// Rendezvous word states (low 8 bits; the generation sits above).
enum class Rendezvous : std::uint8_t { free = 0, posted = 1, reading = 2, done = 3, cancelled = 4, clear_to_send = 5 };

struct P2pOptions {
  bool cma = true;  ///< allow process_vm_readv (shm.cma / COMM_SHM_CMA)
};

class P2p {
 public:
  P2p(const Segment& segment, Sync& sync, int rank, P2pOptions options);
  P2p(const P2p&) = delete;
  P2p& operator=(const P2p&) = delete;

  /// Probes cross-memory reads from every peer (after all ranks attached).
  void probe_peers();
  bool cma(int peer) const { return peers_[static_cast<std::size_t>(peer)].cma; }
  /// The peer's pid as this process may name it (valid once probe_peers() ran).
  int pid(int peer) const { return peers_[static_cast<std::size_t>(peer)].pid; }
  std::size_t eager_limit() const noexcept { return eager_max_; }

  void isend(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Completion& c);
  void irecv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Completion& c);
  bool progress();
  void cancel(Completion& c) noexcept;
  /// True if progress() would find something to do (records to read, ring
  /// space for queued sends, rendezvous words that moved): cheap, for wait().
  bool has_work() const noexcept;
  /// Fails operations pending on dead or departed peers (and, after a grace,
  /// all pending operations once any rank is known dead). Returns true if any failed.
  bool check_peers();
  bool pending() const noexcept;

 private:
  struct Posted {
    std::uint64_t tag;
    std::byte* data;
    std::size_t bytes;
    Completion* c;
  };
  struct Unexpected {
    std::uint64_t tag;
    RecordKind kind;                 // eager or rts
    std::vector<std::byte> payload;  // eager
    std::uint64_t total = 0, address = 0, ticket = 0;
  };
  struct Stream {  // receiving a rendezvous message in fragments
    std::uint64_t ticket = 0;
    std::byte* data = nullptr;
    std::size_t total = 0, received = 0;
    Completion* c = nullptr;  // null: discard (cancelled)
    bool active = false;
  };
  struct Send {
    RecordKind kind;       // eager, rts (rendezvous), data (streaming after clear-to-send), cancel
    std::uint64_t tag;
    const std::byte* data;
    std::size_t bytes;
    std::size_t sent = 0;  // streaming offset
    Completion* c;
    std::uint64_t ticket = 0;
  };
  struct Outstanding {  // a rendezvous send whose RTS is out
    Completion* c = nullptr;
    const std::byte* data = nullptr;
    std::size_t bytes = 0;
    std::uint64_t ticket = 0;
    bool used = false;
  };
  struct Peer {
    RingControl* out = nullptr;  // ring to the peer (we write head)
    RingControl* in = nullptr;   // ring from the peer (we write tail)
    std::byte* out_data = nullptr;
    std::byte* in_data = nullptr;
    std::atomic<std::uint64_t>* rv_out = nullptr;  // our rendezvous words toward the peer
    std::atomic<std::uint64_t>* rv_in = nullptr;   // the peer's rendezvous words toward us
    std::uint64_t out_head = 0;       // our copy of head (we are the only writer)
    std::uint64_t out_tail_seen = 0;  // last tail read
    std::uint64_t in_tail = 0;        // our copy of tail (we are the only reader)
    std::deque<Posted> posted;
    std::deque<Unexpected> unexpected;
    std::deque<Send> queue;  // records not yet in the ring, in posting order
    std::array<Outstanding, kRendezvousSlots> outstanding{};
    std::array<Stream, kRendezvousSlots> streams{};
    std::uint64_t generation = 0;
    int pid = 0;
    bool cma = false;
    bool failed = false;  // dead or departed: its operations were failed
  };

  bool drain(int from);
  void on_record(int from, const RecordHeader& h, const std::byte* payload);
  void deliver_eager(int from, const Posted& r, const std::byte* payload, std::size_t bytes);
  void start_rendezvous_recv(int from, const Posted& r, std::uint64_t total, std::uint64_t address,
                             std::uint64_t ticket);
  bool push(int to);
  bool try_write(Peer& p, const RecordHeader& h, const std::byte* payload, std::size_t payload_bytes);
  bool poll_rendezvous(int to);
  int free_rendezvous_slot(const Peer& p) const;
  bool cancel_queued(Completion& c) noexcept;
  void cancel_outstanding(Completion& c) noexcept;
  static std::chrono::nanoseconds read_grace(std::size_t bytes) noexcept;
  void fail_peer(int peer, ErrorCode code, const std::string& why);
  void self_send(std::uint64_t tag, const void* data, std::size_t bytes, Completion& c);
  void self_recv(std::uint64_t tag, void* data, std::size_t bytes, Completion& c);
  std::string mismatch(int from, std::uint64_t tag, std::size_t sent, std::size_t room) const;

  const Segment& seg_;
  Sync& sync_;
  int rank_;
  int n_;
  P2pOptions opts_;
  std::size_t ring_bytes_;
  std::size_t max_payload_;
  std::size_t eager_max_;
  std::vector<Peer> peers_;
  std::uint64_t probe_value_ = 0;
  // Self messages: the rendezvous is local (both buffers are ours).
  struct SelfSend {
    std::uint64_t tag;
    const std::byte* data;
    std::size_t bytes;
    Completion* c;
  };
  std::deque<SelfSend> self_sends_;
  std::deque<Posted> self_recvs_;
  Clock::time_point last_check_{};
  Clock::time_point obituary_seen_{};  // when this rank first saw another rank's obituary
};

}  // namespace comm::shm
