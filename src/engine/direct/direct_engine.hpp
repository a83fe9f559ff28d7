#pragma once
// The direct-memory engine: runs collectives as direct-memory programs over a
// transport's peer memory (Transport::direct()). Created once per
// communicator; keeps the call counter that numbers flags and picks slots,
// the plans (programs per algorithm and size, built once), and whether the
// last program left this rank synced with everyone (if not, the next call
// first waits for one signal of every peer of that call; see comm/direct.hpp).
//
// Blocking: run() returns when this rank's program is done. Driven by one
// thread at a time; DirectMemory's transport interrupt() unblocks it.

#include "engine/direct/cpu_executor.hpp"
#include "engine/direct/direct_run.hpp"
#include "engine/direct/direct_algorithm.hpp"
#include "engine/engine.hpp"
#include "select/direct_model.hpp"
#include "select/selector.hpp"

#include <comm/transport.hpp>

#include <array>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace comm::direct {

// One algorithm at one call shape for this rank, built once (DirectEngine::plan).
struct DirectPlan {
  DirectProgram program;
  std::optional<OneShotShape> one_shot;  // run directly, not interpreted (cpu_executor.hpp)
  std::size_t algorithm_index = 0;       // among all_direct_algorithms(), for call_word()
  // Window data that moves (HostCall::data_shift, see place_data): the
  // bytes it takes in the slot's data ring (0: it stays where the program
  // put it) and the end of its highest operand before the shift.
  std::size_t ring_bytes = 0;
  std::size_t data_end = 0;
};

// Windows below this keep all their bytes for the algorithms: no line region.
inline constexpr std::size_t kLineRegionMinWindow = std::size_t{64} << 10;

class DirectEngine final : public detail::Engine, public AlgorithmOffer {
 public:
  DirectEngine(Transport& transport, DirectMemory& memory, int rank, int size);

  // detail::Engine: operations complete inside start().
  std::string_view name() const noexcept override { return "direct"; }
  void check(const detail::Call& call, std::string_view algorithm) const override;
  void start(detail::Operation& op, const detail::Call& call) override;
  void wait(detail::Clock::time_point until) override { transport_.wait(until); }
  void interrupt() noexcept override { transport_.interrupt(); }

  // AlgorithmOffer: the direct algorithms and their predictions, for the selector.
  std::vector<std::string> algorithms(Collective c) const override;
  double predict_us(Collective c, std::string_view name, std::size_t bytes,
                    const ComputeParams& compute) const override;
  std::string unavailable(Collective c, std::string_view name) const override;
  // Why `a` cannot run at any size here ("" if it can).
  std::string unavailable(const DirectAlgorithm& a) const;

  DirectMemory& memory() noexcept { return memory_; }
  const DirectCosts& costs() const noexcept { return costs_; }
  // The algorithm's arguments for a call of `count` elements of `elem_size` bytes.
  DirectArgs args(const DirectAlgorithm& a, std::size_t count, std::size_t elem_size, int root) const;
  bool eligible(const DirectAlgorithm& a, std::size_t count, std::size_t elem_size, int root) const;
  // Predicted microseconds (negative: not eligible), for the selector.
  double predict(const DirectAlgorithm& a, std::size_t count, std::size_t elem_size,
                 const ComputeParams& compute) const;

  // The algorithm `name` of collective `c` (null: none); cheap while calls repeat.
  const DirectAlgorithm* find(Collective c, std::string_view name) const;
  // `call`'s shape made ready to run (see PreparedCall): valid for the engine's life.
  PreparedCall prepare(const DirectAlgorithm& a, const DirectRun& call);
  // Runs `a` for this rank; throws comm::Error (usage errors before any flag moves).
  void run(const DirectAlgorithm& a, const DirectRun& call);
  // Runs a prepared call (`call` of the same shape) for this rank.
  void run(const PreparedCall& p, const DirectRun& call);
  std::uint64_t calls() const noexcept { return seq_; }
  // Writes this rank's window data region once: consecutive calls put their
  // data at moving offsets through the whole window (place_data), and a pass
  // through lines that left the caches misses to memory on every line
  // (calibration, which makes a few calls per size, timed mem_twoshot at 64
  // KiB at 2-4x its back-to-back time). Run at creation and before
  // calibration times each size. Only when no peer may still be reading this
  // rank's window: before its first call, or once every peer has entered a
  // later call (a barrier).
  void touch_windows();
  // Reads every peer's window data region once, so that its lines are where
  // a back-to-back caller's calls leave them: read by the peers, which a
  // writer must take back. Freshly touched lines alone made calibration time
  // mem_oneshot at 8 KiB at 1.6 us against 2.2 us back to back (shm, 2
  // ranks). After every rank's touch_windows (a barrier between).
  void read_peer_windows() const;

 private:
  using Key = std::tuple<const DirectAlgorithm*, std::size_t, std::size_t, int>;
  const DirectPlan& plan(const DirectAlgorithm& a, std::size_t count, std::size_t elem_size, int root);
  // Sets plan's ring_bytes and data_end from every rank's program of it
  // (identical on every rank).
  static void size_in_ring(DirectPlan& plan, std::span<const DirectProgram> all, std::size_t window_bytes);
  // The shift of this call's window data: the oldest bytes of the slot's ring.
  std::size_t place_data(const DirectPlan& plan, unsigned slot);

  Transport& transport_;
  DirectMemory& memory_;
  PeerReads* peer_reads_;  // memory_.peer_reads(): null when not offered
  DirectMemoryInfo info_;
  // Where the line region starts in every slot (comm/direct.hpp), 0 when the
  // windows are too small to spare it; the algorithms get the rest.
  std::size_t line_region_ = info_.window_bytes >= kLineRegionMinWindow ? info_.window_bytes - kDirectLineRegionBytes : 0;
  // The bytes of every slot that the algorithms may use (all but the line region).
  std::size_t window_data_bytes() const noexcept {
    return info_.window_bytes - (line_region_ ? kDirectLineRegionBytes : 0);
  }
  // Whether the windows are host memory with a data region past the flag's
  // line (what touch_windows and read_peer_windows go through).
  bool host_data_region() const noexcept {
    return info_.memory == MemoryKind::host && info_.window_bytes > kDirectLineBytes;
  }
  DirectCosts costs_;
  int rank_;
  int size_;
  std::uint64_t seq_ = 0;     // direct-memory calls so far (identical on every rank)
  unsigned slot_ = 0;         // seq_ % info_.slots
  bool last_synced_ = true;   // the previous call's program synced this rank with everyone
  std::map<Key, std::unique_ptr<DirectPlan>> plans_;
  std::array<std::pair<Key, const DirectPlan*>, 4> recent_{};
  std::size_t recent_next_ = 0;
  std::vector<std::byte> input_copy_;
  std::vector<std::byte> scratch_;  // DirectSpace::scratch: as large as the largest plan's
  std::vector<std::vector<std::byte*>> windows_;  // [slot][rank]: fixed for the engine's life
  // Per slot, where the next moving call's data goes (the same on every rank:
  // every rank makes the same calls in the same order).
  std::vector<std::size_t> ring_next_;
  // Per collective, the last call check() passed, for start() (the same
  // call, right after) and for the calls that repeat it: a decode loop that
  // alternates collectives looks up names, eligibility and plans once each.
  struct Checked {
    const DirectAlgorithm* algorithm = nullptr;
    std::string_view name;  // as the caller named it
    std::size_t count = 0, elem_size = 0;
    int root = 0;
    const DirectPlan* plan = nullptr;  // plan(algorithm, count, elem_size, root), once run
  };
  mutable std::array<Checked, std::size(kAllCollectives)> checked_{};
  std::vector<FlagWait> guard_;
  std::vector<FlagWait> wait_buffer_;
  // The executor's view of the call being run: the fields that stay (rank,
  // buffers) are set once, the rest by each run().
  HostCall host_;
};

}  // namespace comm::direct
