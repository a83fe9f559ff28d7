#pragma once
// The `mpi` transport: point-to-point over MPI_Isend/MPI_Irecv/MPI_Test on a
// communicator of its own (duplicated from MPI_COMM_WORLD or from one the
// program hands over), and MPI's own collectives offered as the algorithm
// `native`. See README.md for the design: tag matching, thread levels,
// initialisation, timeouts and what happens when a rank dies.

#include "mpi_runtime.hpp"

#include <comm/transport.hpp>

#include "core/transport_base.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace comm {
namespace mpi_detail {

/// The store of COMM_STORE=mpi (and of the mpi transport when no store is
/// configured): rank 0 of the MPI communicator hosts a TCP store and MPI
/// broadcasts its address and a fresh token. Checks that config's rank and
/// world size are MPI's; throws invalid_config naming both when they differ.
std::shared_ptr<Store> make_bootstrap_store(const Config& config);

class MpiTransport;

/// MPI's collectives as the algorithm "native": every collective MPI has,
/// every dtype (f16/bf16 through user operators running comm's kernels),
/// host memory, counts up to INT_MAX elements (MPI counts are int).
class MpiNative final : public NativeCollectivesOf<MpiTransport> {
 public:
  using NativeCollectivesOf::NativeCollectivesOf;
  COMM_NATIVE_COLLECTIVES_OVERRIDES;

 private:
  /// Starts the collective: blocking mode runs it (req stays null), poll mode
  /// leaves its request in *req.
  void start(const CollectiveArgs& a, const void* send, MPI_Request* req);
  void finish(const CollectiveArgs& a, MPI_Request* req);
  /// After a timed-out MPI_I* call: MPI may still write the scratch, so it is never freed.
  void abandon_scratch() { new std::vector<std::byte>(std::move(scratch_)); scratch_ = {}; }

  std::vector<std::byte> scratch_;  ///< an input that overlaps the output
  std::vector<int> ints_;           ///< all_to_allv counts and displacements as int
};

class MpiTransport final : public NativeTransportBase<MpiTransport, MpiNative>, public Shutdownable {
 public:
  explicit MpiTransport(const TransportInit& init);
  ~MpiTransport() override;

  COMM_TRANSPORT_POINT_TO_POINT_OVERRIDES;

  void shutdown_before_finalize() noexcept override;

  // ---- for MpiNative
  MPI_Comm comm() const noexcept { return comm_; }
  bool native_blocks() const noexcept { return native_blocks_; }
  Watch& watch() noexcept { return watch_; }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  /// Throws transport_failure quoting the first failure if the transport is unusable.
  void check_usable(std::string_view what) const;
  /// Records that this transport can no longer be trusted (first reason wins).
  void mark_failed(const std::string& reason) noexcept;

  /// The first bytes of every control message (all on MPI tag kControlTag).
  struct Header {
    std::uint32_t kind = 0;
    std::uint32_t parts = 0;  ///< rts: payload messages that follow (<= 1 GiB each)
    std::uint64_t tag = 0;    ///< eager, rts: comm's tag
    std::uint64_t bytes = 0;  ///< eager, rts: message size
    std::uint64_t id = 0;     ///< rts, cts: the sender's message number towards this receiver
  };

 private:
  struct Op;
  struct Unexpected;
  struct Pending;
  using Key = std::pair<int, std::uint64_t>;  // (peer, comm tag)
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept {
      return std::hash<std::uint64_t>{}(k.second * 0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(k.first));
    }
  };

  void setup_comm(const TransportInit& init, MPI_Comm base);
  void post_ring(std::size_t slot);
  bool drain_ring();
  bool drain_requests();
  void on_control(int source, const std::byte* msg, std::size_t len);
  void on_eager(int source, const Header& h, const std::byte* payload);
  void on_rts(int source, const Header& h);
  void on_cts(int source, const Header& h, bool refused);
  bool deliver_eager(Op& op, const std::byte* payload, std::size_t bytes);
  void accept_rts(Op& op, std::uint64_t id, std::uint32_t parts, std::size_t bytes);
  void send_control(int peer, const Header& h, const void* payload, std::size_t payload_bytes, Op* op);
  void post_payload(Op& op, bool is_send, int payload_tag);
  void finish_op(Op& op, bool ok, ErrorCode code, std::string message);
  void fail_pending();
  void fail_mpi(Op* op, int rc, std::string_view what);
  std::vector<std::byte> take_buffer(std::size_t bytes);
  int payload_tag(std::uint64_t id) const noexcept;
  std::string describe(const Op& op) const;

  std::chrono::milliseconds timeout_;
  bool native_blocks_ = true;
  std::string base_name_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int tag_ub_ = 32767;
  std::size_t max_part_ = 0;  ///< largest payload message (transport option mpi.max_part_bytes, default 1 GiB)
  std::vector<bool> same_host_;
  Watch watch_;

  // Control messages arrive in a ring of pre-posted MPI_ANY_SOURCE receives,
  // consumed strictly in posting order (= the order MPI matched them).
  std::vector<std::vector<std::byte>> ring_;
  std::vector<MPI_Request> ring_requests_;
  std::size_t ring_head_ = 0;

  // Every other outstanding MPI request, with what it is for.
  std::vector<MPI_Request> requests_;
  std::vector<Pending> pending_;

  std::unordered_map<const Completion*, std::unique_ptr<Op>> ops_;
  std::unordered_map<Key, std::deque<Op*>, KeyHash> posted_;            // receives not yet matched
  std::unordered_map<Key, std::deque<Unexpected>, KeyHash> unexpected_;  // messages not yet received
  std::map<std::pair<int, std::uint64_t>, Op*> awaiting_cts_;            // (peer, id) -> large send
  std::vector<std::uint64_t> next_id_;                                   // per destination
  std::vector<std::vector<std::byte>> spare_buffers_;

  std::atomic<bool> interrupted_{false};
  std::atomic<bool> failed_{false};
  std::string failed_reason_;
  bool shut_down_ = false;
};

}  // namespace mpi_detail
}  // namespace comm
