#pragma once
// The shared segment of one `shm` communicator: its layout, its creation
// through the store handshake, and the liveness of the ranks attached to it.
//
// One POSIX shared-memory object per communicator, named "/comm-shm-<pid of
// rank 0>-" plus 32 hex digits from getrandom (unguessable, so two jobs never
// meet), created by rank 0 with O_EXCL and mode 0600, sized with
// posix_fallocate (a /dev/shm too small fails here, naming the size, instead
// of SIGBUS later), and unlinked by the last rank to map it: once the
// communicator exists nothing of it is left in /dev/shm, whatever happens to
// the job. Before that, a job killed whole between rank 0's creation and the
// last rank's mapping would leave it; the pid in the name (util/process.hpp
// comm_shm_prefix) lets commrun remove it when rank 0 ends.
//
// Liveness: each rank holds an open-file-description lock on byte `rank` of
// the segment for as long as it is attached. The kernel drops it when the
// process dies, however it dies (SIGKILL included), and another rank reads it
// with F_OFD_GETLK. Unlike pids this works across pid namespaces (containers
// that share /dev/shm and the network but not pids), cannot be fooled by pid
// reuse, and does not see a zombie as alive.
//
// Layout (all offsets multiples of 64; atomics are lock-free, so address-free):
//   Header | RankControl[n] | per ordered pair (from, to), from != to:
//   RingControl + rendezvous words + ring data | windows: n ranks x slots x
//   (window_bytes + kWindowStagger)

#include <comm/store.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace comm::shm {

inline constexpr std::size_t kLine = 64;
inline constexpr unsigned kSlots = 2;
/// What each window slot starts past the one before beyond its window_bytes
/// (a page multiple): slot k of the segment starts k lines into its page.
/// Page-aligned windows put every rank's flag at one page offset, and a load
/// of a peer's flag right after a store to one's own then waits for that
/// store to leave the core (4K aliasing): 8-12 ns of ~150 in a 2-rank 8 B
/// all-reduce here. 64 slots (32 ranks) before two share a page offset.
inline constexpr std::size_t kWindowStagger = kLine;
/// Outstanding large sends per ordered pair (rendezvous words).
inline constexpr unsigned kRendezvousSlots = 64;

/// Where everything is; identical on every rank (computed from n and the size).
struct Layout {
  int nranks = 0;
  std::size_t total = 0;         ///< bytes of the whole segment
  std::size_t ring_bytes = 0;    ///< data bytes of one ring (a power of two)
  std::size_t window_bytes = 0;  ///< bytes of one window slot
  std::size_t control_off = 0;
  std::size_t pairs_off = 0;
  std::size_t pair_stride = 0;
  std::size_t windows_off = 0;

  /// The default size for n ranks when `requested` is 0; else fits `requested`
  /// or throws invalid_config naming `what` and the least size that would work.
  static Layout compute(int n, std::size_t requested, const std::string& what);
  /// The ring of (from, to), from != to: n (n - 1) of them, none for a rank to itself.
  std::size_t pair_offset(int from, int to) const noexcept {
    const auto column = static_cast<std::size_t>(to < from ? to : to - 1);
    return pairs_off + (static_cast<std::size_t>(from) * static_cast<std::size_t>(nranks - 1) + column) * pair_stride;
  }
  std::size_t window_offset(int rank, unsigned slot) const noexcept {
    return windows_off + (static_cast<std::size_t>(rank) * kSlots + slot) * (window_bytes + kWindowStagger);
  }
};

enum class RankState : std::uint32_t { absent = 0, attached = 1, departed = 2 };

struct alignas(kLine) Header {
  std::atomic<std::uint64_t> magic{0};
  std::uint32_t version = 0;
  std::uint32_t nranks = 0;
  std::uint64_t total = 0;
  std::uint64_t ring_bytes = 0;
  std::uint64_t window_bytes = 0;
  std::atomic<std::uint32_t> attached{0};
  alignas(kLine) std::atomic<std::uint32_t> sleepers{0};  ///< ranks asleep on their doorbell
  /// First failure any rank saw: low 32 bits dead rank + 1, high 32 bits reporter + 1; 0: none.
  alignas(kLine) std::atomic<std::uint64_t> obituary{0};
};

/// One rank's control block. The first line is written by the others too
/// (doorbell bumps); the second only by its owner.
struct alignas(kLine) RankControl {
  std::atomic<std::uint32_t> doorbell{0};  ///< futex word: bumped to wake this rank
  std::atomic<std::uint32_t> sleeping{0};  ///< 1 while this rank is (about to be) asleep
  alignas(kLine) std::atomic<RankState> state{RankState::absent};
  std::int64_t pid = 0;            ///< getpid() in its own pid namespace
  std::uint64_t probe_address = 0; ///< address of a word in its memory, for the cross-memory probe
  std::uint64_t probe_value = 0;   ///< what that word holds
};

/// An SPSC byte ring from one rank to another: the writer owns head, the reader tail.
struct RingControl {
  alignas(kLine) std::atomic<std::uint64_t> head{0};
  alignas(kLine) std::atomic<std::uint64_t> tail{0};
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::uint32_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free to be address-free");

/// A mapped segment. Closing marks this rank departed, drops its liveness lock and unmaps.
class Segment {
 public:
  /// Creates (rank 0) or opens the communicator's segment through `store` and
  /// waits until all `n` ranks have mapped it; the last to map it unlinks it.
  /// Throws invalid_config / transport_failure / timeout with what went wrong and on which rank.
  static Segment attach(Store& store, int rank, const Layout& layout, std::chrono::milliseconds timeout);
  Segment() = default;
  Segment(Segment&& o) noexcept;
  Segment& operator=(Segment&& o) noexcept;
  ~Segment();
  /// Marks this rank departed (others waiting on it then fail at once) and unmaps.
  void close() noexcept;

  const Layout& layout() const noexcept { return layout_; }
  std::byte* base() const noexcept { return base_; }
  Header& header() const noexcept { return *reinterpret_cast<Header*>(base_); }
  RankControl& control(int rank) const noexcept {
    return reinterpret_cast<RankControl*>(base_ + layout_.control_off)[rank];
  }
  /// The segment's name ("/comm-shm-<pid>-..."), already unlinked.
  const std::string& name() const noexcept { return name_; }
  /// False once another rank `rank` has died: nobody holds its liveness lock (a
  /// rank asking about itself gets false: its own lock never conflicts with it). (A departed
  /// rank also reads as not alive; control(rank).state tells them apart.)
  bool alive(int rank) const noexcept;
  /// Records that `dead` died, as seen by `by`, unless a death is already recorded.
  void post_obituary(int dead, int by) const noexcept;
  /// "rank X died (seen by rank Y)" for the recorded death, or "" if none.
  std::string obituary() const;
  /// Why `rank` is gone: "died (its process is gone)" or "closed its communicator",
  /// plus the recorded death when it is another rank's.
  std::string why_gone(int rank) const;

 private:
  void lock_liveness(int rank);
  Layout layout_;
  std::byte* base_ = nullptr;
  int fd_ = -1;
  int rank_ = -1;
  std::string name_;
};

/// A fresh unguessable segment name: "/comm-shm-<this pid>-" + 32 hex digits from getrandom.
std::string random_segment_name();

}  // namespace comm::shm
