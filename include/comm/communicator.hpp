#pragma once
/// \file communicator.hpp
/// The communicator: a group of ranks and the collectives among them.
///
/// Blocking calls return when this rank's part is complete and its buffers
/// may be reused. `i`-prefixed calls return a Work handle at once; the
/// operation advances whenever any call on this communicator (or Work::test/
/// wait) runs — there is no progress thread, so call test() while overlapping.
/// Stream-ordered transports (NCCL) complete a call when it is enqueued on
/// CallOptions::stream; synchronise the stream to see the data.
///
/// Every rank must call the collectives of a communicator in the same order
/// with matching arguments. A Communicator is used from one thread at a time;
/// abort() is the exception and may be called from any thread.
///
/// Errors: usage errors (comm::Error with is_usage()) are thrown before any
/// data moves and leave the communicator usable. Runtime errors (timeout, dead
/// peer, transport failure, abort) fail the communicator: every later call
/// throws ErrorCode::communicator_failed at once, quoting the first error.

#include <comm/buffer.hpp>
#include <comm/config.hpp>
#include <comm/error.hpp>
#include <comm/export.hpp>
#include <comm/store.hpp>
#include <comm/transport.hpp>
#include <comm/types.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace comm {

namespace detail {
class CommunicatorImpl;
struct Operation;
struct Access;  // this repository's tools and tests reach the internals through it
}  // namespace detail

/// Per-call options. Defaults mean "use the communicator's configuration".
struct CallOptions {
  /// Algorithm by name ("ring", "direct", "native", ...); "" or "auto" =
  /// automatic selection (override string, then cost model). Beats COMM_ALGO.
  std::string algorithm;
  /// Operation timeout; 0 = Config::timeout.
  std::chrono::milliseconds timeout{0};
  /// send/recv only: messages match on (peer, tag) in posting order.
  std::uint32_t tag = 0;
  /// cudaStream_t for stream-ordered transports; ignored by host transports.
  void* stream = nullptr;
};

/// Handle of a non-blocking operation. Copyable; all copies share the
/// operation. A default-constructed Work is complete.
class COMM_API Work {
 public:
  Work() = default;
  /// Advances all operations of the communicator; true once this one is
  /// complete. Throws the operation's comm::Error if it failed.
  bool test();
  /// Waits until complete (up to the operation's timeout, then throws timeout).
  void wait();
  /// Waits at most `d`; false if still running (the operation keeps going).
  bool wait_for(std::chrono::milliseconds d);
  /// The algorithm this operation runs.
  std::string_view algorithm() const noexcept;

 private:
  friend class Communicator;
  explicit Work(std::shared_ptr<detail::Operation> op) : op_(std::move(op)) {}
  std::shared_ptr<detail::Operation> op_;
};

/// One candidate of the selector at a given size (see Communicator::candidates).
struct CandidateCost {
  std::string algorithm;
  double predicted_us = -1;  ///< negative: no prediction (native without a model)
  bool chosen = false;
  std::string note;          ///< why it won, lost, or is not eligible
  /// Its reduction order is the rank order at every size on this group, so it
  /// may run in deterministic mode (Config::deterministic).
  bool deterministic = false;
};

/// One row of a selection table: sizes in [min_bytes, max_bytes) use `algorithm`.
struct SelectionRange {
  std::size_t min_bytes = 0;
  std::size_t max_bytes = 0;  ///< SIZE_MAX for "and above"
  std::string algorithm;
  std::string source;         ///< "cost model", "override", "tuning file"
};

class COMM_API Communicator {
 public:
  /// Creates this rank's member of the group described by `config`, meeting the
  /// other ranks through the store named by config.store. Blocks until all
  /// ranks have joined (up to config.timeout).
  static Communicator create(const Config& config);
  /// Same, meeting through `store` (e.g. make_memory_store() shared by threads).
  static Communicator create(const Config& config, std::shared_ptr<Store> store);

  Communicator() noexcept;  ///< an invalid communicator (valid() == false)
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  ~Communicator();  ///< noexcept; pending operations are cancelled

  bool valid() const noexcept { return impl_ != nullptr; }
  int rank() const;
  int size() const;
  const Config& config() const;
  std::string_view transport_name() const;

  // ---- collectives (blocking). Counts are in elements of the views' dtype.

  /// out[i] = op over ranks of in[i]. in and out have equal count and dtype.
  /// In place: in.data == out.data (MPI_IN_PLACE / NCCL sendbuff == recvbuff);
  /// no extra copy.
  void allreduce(ConstView in, View out, ReduceOp op, const CallOptions& opts = {});
  void allreduce(View inout, ReduceOp op, const CallOptions& opts = {});
  /// in holds size()*out.count elements; rank r receives block r of the reduction.
  /// In place (NCCL's convention): out.data == in.data + rank()*out.count,
  /// i.e. out is this rank's block of in; the other blocks of in are left as
  /// they were. Any other overlap of in and out is also correct; every in-place
  /// form costs one copy of in first.
  void reduce_scatter(ConstView in, View out, ReduceOp op, const CallOptions& opts = {});
  /// out holds size()*in.count elements; block r comes from rank r.
  /// In place (MPI_IN_PLACE's and NCCL's convention): in.data == out.data +
  /// rank()*in.count, i.e. in is this rank's block of out, already filled. Any
  /// other overlap is also correct; overlapping forms cost a copy of in (in.count).
  void allgather(ConstView in, View out, const CallOptions& opts = {});
  /// Copies root's buffer to every rank; always in place (one buffer).
  void broadcast(View buffer, int root, const CallOptions& opts = {});
  /// Reduction delivered to `root` only; out is ignored (may be empty) elsewhere.
  /// In place: in.data == out.data on the root (MPI_IN_PLACE at the root); on
  /// the other ranks in is only read, whatever out is.
  void reduce(ConstView in, View out, ReduceOp op, int root, const CallOptions& opts = {});
  /// in and out hold size() blocks of in.count/size() elements; block j of
  /// rank i's in becomes block i of rank j's out.
  /// In place: in.data == out.data (MPI_IN_PLACE); every algorithm supports it
  /// (pairwise stages about half the blocks in scratch). A partial overlap is
  /// also correct but costs a copy of in. NCCL's `native` rejects any overlap.
  void all_to_all(ConstView in, View out, const CallOptions& opts = {});
  /// Variable all-to-all: per-peer counts and displacements (elements).
  /// In place: in.data == out.data with in.count == out.count; the send and
  /// receive layouts may differ inside that one buffer, and what no received
  /// block covers keeps its value. Received blocks are staged in scratch.
  /// Other overlaps are also correct but cost a copy of in.
  void all_to_allv(ConstView in, std::span<const std::size_t> send_counts,
                   std::span<const std::size_t> send_displs, View out,
                   std::span<const std::size_t> recv_counts,
                   std::span<const std::size_t> recv_displs, const CallOptions& opts = {});
  /// Sends buffer to `peer`; messages between two ranks match on
  /// CallOptions::tag in posting order. Returns when the buffer may be reused:
  /// depending on the transport and the size that is before the receiver
  /// posted its receive (eager) or only once it has (rendezvous), so never
  /// rely on either — an unmatched send may wait until the timeout.
  void send(ConstView buffer, int peer, const CallOptions& opts = {});
  /// Receives exactly buffer.count elements (a different size is an error naming both).
  void recv(View buffer, int peer, const CallOptions& opts = {});
  void barrier(const CallOptions& opts = {});

  // ---- non-blocking variants (same arguments; buffers must outlive the Work)
  Work iallreduce(ConstView in, View out, ReduceOp op, const CallOptions& opts = {});
  Work ireduce_scatter(ConstView in, View out, ReduceOp op, const CallOptions& opts = {});
  Work iallgather(ConstView in, View out, const CallOptions& opts = {});
  Work ibroadcast(View buffer, int root, const CallOptions& opts = {});
  Work ireduce(ConstView in, View out, ReduceOp op, int root, const CallOptions& opts = {});
  Work iall_to_all(ConstView in, View out, const CallOptions& opts = {});
  /// The four arrays are read during the call only; the buffers must outlive the Work.
  Work iall_to_allv(ConstView in, std::span<const std::size_t> send_counts, std::span<const std::size_t> send_displs,
                    View out, std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_displs,
                    const CallOptions& opts = {});
  Work isend(ConstView buffer, int peer, const CallOptions& opts = {});
  Work irecv(View buffer, int peer, const CallOptions& opts = {});
  Work ibarrier(const CallOptions& opts = {});

  /// Collective over this communicator: ranks with the same color form a new
  /// communicator, ordered by (key, old rank). color < 0 returns an invalid
  /// Communicator for that rank. Uses the same transport and configuration.
  Communicator split(int color, int key);

  /// Fails every pending and future operation with ErrorCode::aborted and wakes
  /// waiters (within 100 ms). Safe from any thread.
  void abort() noexcept;
  /// True once a runtime error or abort() has failed the communicator.
  bool failed() const noexcept;

  // ---- introspection (identical on every rank)
  /// Every rank's host, pid and local rank, and the hosts they form (exchanged at creation).
  const PeerTable& peers() const;
  /// The link between ranks a and b, as exchanged at creation.
  LinkInfo link(int a, int b) const;
  /// The algorithm automatic selection uses for `bytes` of `c`.
  std::string algorithm_for(Collective c, std::size_t bytes) const;
  /// Every eligible algorithm for `bytes` of `c` with its predicted cost.
  std::vector<CandidateCost> candidates(Collective c, std::size_t bytes) const;
  /// The size-range table of `c`, from 1 byte to `max_bytes`.
  std::vector<SelectionRange> selection_table(Collective c, std::size_t max_bytes = std::size_t{1} << 30) const;
  /// Algorithms that exist for `c` on this communicator (ours and native ones).
  std::vector<std::string> algorithms(Collective c) const;
  /// The last operations of this rank as JSON (flight recorder).
  std::string flight_recorder_json() const;
  /// Payload bytes this rank has sent to each peer (index = peer rank) since
  /// creation, counted as sends complete: every collective run as a schedule
  /// and every send(). Native collectives (algorithm "native") move their data
  /// inside the transport and are not counted. Subtract two readings to get
  /// what one operation sent, e.g. how much crossed to other hosts
  /// (peers().same_host). Not thread safe against a concurrent call.
  std::vector<std::uint64_t> bytes_sent() const;

 private:
  friend struct detail::Access;
  explicit Communicator(std::unique_ptr<detail::CommunicatorImpl> impl) noexcept;
  detail::CommunicatorImpl& impl() const;
  std::unique_ptr<detail::CommunicatorImpl> impl_;
};

}  // namespace comm
