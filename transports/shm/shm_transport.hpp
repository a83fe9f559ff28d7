#pragma once
// The `shm` transport: the ranks of one host share one segment per
// communicator (shm_segment.hpp) and talk through it: point-to-point messages
// through rings (shm_p2p.hpp), and direct memory (comm::DirectMemory): every
// rank's windows mapped by every other rank, for the direct-memory engine.
//
// Settings (Config::transport_options first, then the environment):
//   shm.size      COMM_SHM_SIZE      segment bytes (K/M/G suffixes); default: rings plus
//                                    two 2 MiB windows per rank (1 MiB beyond 8 ranks)
//   shm.spin_us   COMM_SHM_SPIN_US   microseconds a waiter spins before yielding
//                                    (default 2; 0 when ranks outnumber the CPUs they may
//                                    run on together: the union of their affinities)
//   shm.yield_us  COMM_SHM_YIELD_US  microseconds it then yields before sleeping (default 1000)
//   shm.cma       COMM_SHM_CMA       0 forbids process_vm_readv (large messages are then
//                                    streamed through the rings); default 1 (used where permitted)

#include "shm_p2p.hpp"
#include "shm_segment.hpp"
#include "shm_sync.hpp"

#include <comm/transport.hpp>

#include "core/transport_base.hpp"

#include <memory>
#include <string>

namespace comm {

/// Registers the "shm" transport (called by the core registry).
void register_shm_transport();

namespace shm {

/// The settings above, parsed; throws invalid_config naming the key or variable.
struct Settings {
  std::size_t size = 0;  ///< 0: the default for the group
  WaitPolicy wait;
  bool cma = true;
  /// `cpus`: how many CPUs the group's ranks may run on together (group_cpus); 0 = this
  /// process's affinity alone.
  static Settings from(const Config& config, int local_ranks, int cpus = 0);
};

/// CPUs in the union of the affinities of the group's processes (peers' pids; a
/// pid that cannot be asked counts as this process's affinity). A rank bound to
/// one core by its launcher still has peers on others: spinning is then right.
int group_cpus(const PeerTable& peers);

/// The link every pair of shm ranks has (alpha of the rings, beta of a copy).
LinkInfo shm_link(bool self, std::size_t eager_limit, bool cma);

class ShmTransport final : public TransportBase, public DirectMemory, public PeerReads {
 public:
  ShmTransport(const TransportInit& init, const Settings& settings);
  ~ShmTransport() override;

  COMM_TRANSPORT_POINT_TO_POINT_OVERRIDES;
  DirectMemory* direct() noexcept override { return this; }

  // DirectMemory
  DirectMemoryInfo info() const noexcept override;
  std::byte* window(int rank, unsigned slot) const noexcept override {
    return segment_.base() + segment_.layout().window_offset(rank, slot);
  }
  void signal(unsigned slot, std::uint64_t value, void* stream) noexcept override;
  void wait(unsigned slot, std::span<const FlagWait> waits, std::chrono::steady_clock::time_point deadline,
            void* stream) override;
  /// Offered when every rank may process_vm_readv every other (agreed at creation).
  PeerReads* peer_reads() noexcept override { return no_peer_reads_ ? nullptr : this; }

  // PeerReads: process_vm_readv, repeated over partial reads.
  void read(int rank, const void* remote, void* local, std::size_t bytes) override;

  const Segment& segment() const noexcept { return segment_; }

 private:
  std::uint64_t flag(int rank, unsigned slot) const noexcept {
    return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(window(rank, slot)))
        .load(std::memory_order_acquire);
  }
  [[noreturn]] void fail_direct_wait(unsigned slot, std::span<const FlagWait> waits) const;
  void check_direct_peers(unsigned slot, std::span<const FlagWait> waits);
  void agree_on_peer_reads(Store& store, bool allowed, std::chrono::milliseconds timeout);

  Segment segment_;
  std::unique_ptr<Sync> sync_;
  std::unique_ptr<P2p> p2p_;
  const char* no_peer_reads_ = nullptr;  // why peer_reads() is null; nullptr: offered
};

}  // namespace shm
}  // namespace comm
