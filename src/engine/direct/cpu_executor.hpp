#pragma once
// Runs one rank's direct-memory program on the calling thread over host
// windows (DirectMemory with MemoryKind::host): copies with memcpy (from a
// peer's own buffer through HostCall::peer_reads),
// reductions with the engine's kernels in the program's source order, signals
// and waits through DirectMemory. Blocks until the program is done; throws
// what DirectMemory::wait throws (peer died, timeout naming who is behind,
// aborted), and mismatch when a peer it waited for is in a different call
// (before any of that peer's data is read).

#include <comm/direct.hpp>
#include <comm/transport.hpp>

#include "util/coarse_clock.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace comm::direct {

// The word a rank stores at kDirectSignatureOffset of its slot: collective,
// dtype, op and root (engine/tags.hpp call_signature, 14 bits), the index of
// the algorithm among all_direct_algorithms() (8 bits) and the element count
// (42 bits).
constexpr std::uint64_t call_word(std::uint64_t signature, std::size_t algorithm_index, std::size_t count) noexcept {
  return (signature & 0x3fff) | (static_cast<std::uint64_t>(algorithm_index) & 0xff) << 14 |
         (static_cast<std::uint64_t>(count) & ((std::uint64_t{1} << 42) - 1)) << 22;
}
// "allreduce of 8 elements of f32 (sum) by mem_oneshot".
std::string describe_call_word(std::uint64_t word);

// A direct-memory wait that failed (timeout, peer_failed), with the awaited
// ranks whose flags had not arrived, ascending: the core explains who holds
// them up (core/peer_notes.hpp) as it does for a schedule's timeout.
class WaitFailure : public Error {
 public:
  WaitFailure(const Error& e, std::vector<int> missing) : Error(e.code(), e.what()), missing_(std::move(missing)) {}
  const std::vector<int>& missing() const noexcept { return missing_; }

 private:
  std::vector<int> missing_;
};

struct HostCall {
  int rank = 0;
  std::uint64_t call_word = 0;  // see call_word(); checked against every awaited peer's
  const std::byte* input = nullptr;
  std::byte* output = nullptr;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  std::uint64_t seq = 1;  // direct-memory call number, from 1
  unsigned slot = 1;      // seq % slots
  // Every rank's window of `slot`, as mapped here (DirectMemory::window), by rank.
  std::byte* const* windows = nullptr;
  // Added to every window operand of the program (never to the flag, the
  // call words or the line region): the same on every rank for a call.
  std::size_t data_shift = 0;
  // Room for the flags of one batch of consecutive waits (at least one per peer).
  // Reads of the peers' buffers, for a program with DirectProgram::reads_peers (else unused).
  PeerReads* peer_reads = nullptr;
  // This rank's private scratch, at least DirectProgram::scratch_bytes.
  std::byte* scratch = nullptr;
  FlagWait* wait_buffer = nullptr;
  std::size_t wait_capacity = 0;
  // When the call fails with a timeout. A call may start without one
  // (time_point{}: the repeat path reads no clock before its first signal);
  // then the first wait that finds a flag missing sets it to now + `timeout`
  // (deadline_of).
  mutable std::chrono::steady_clock::time_point deadline{};
  std::chrono::steady_clock::duration timeout{};
  // How long a poll of data that carries its own flags (line flags) may spin
  // before it waits on the flags instead (DirectMemoryInfo::spin_ns).
  std::chrono::nanoseconds spin{};
  // The caller's bookkeeping that must be in place before the call waits for
  // a peer that is not there yet (a flight record), but need not delay the
  // peers: called once, before the first wait that finds a flag missing; not
  // at all when no wait had to (the caller then records the finished call in
  // one write instead of a posted record and its update). Null: none.
  void (*note)(void*) = nullptr;
  void* note_arg = nullptr;
  mutable bool noted = false;
};

// Runs HostCall::note if it has not run for this call.
inline void run_note(const HostCall& call) {
  if (call.noted) return;
  call.noted = true;
  if (call.note) call.note(call.note_arg);
}

inline std::chrono::steady_clock::time_point deadline_of(const HostCall& call) {
  if (call.deadline == std::chrono::steady_clock::time_point{}) call.deadline = util::coarse_now() + call.timeout;
  return call.deadline;
}

void run_on_host(const DirectProgram& program, DirectMemory& memory, const HostCall& call);

// A program of the one-shot shape (mem_oneshot's, for any size that fits):
// copy this rank's whole input into its own window at `offset`, signal step
// 1, wait for step 1 of every peer, reduce every rank's window at `offset`, in
// rank order, into the output. Decode's small all-reduce runs it back to
// back, and interpreting its four kinds of operation costs more there than
// the exchange, so the executor runs this shape directly.
//
// Messages of up to kDirectLineMaxBytes that do not fit the flag's own line
// may instead travel in line flags (comm/direct.hpp): `lines` is then the
// offset of the line region in every slot. Each rank stores its call words in
// the region's call line, its input line by line, then its call words in the
// flag's line and its signal; a reader checks a peer's call line, takes its
// lines as they land, and
// waits on the peer's flag (spinning, yielding, sleeping, seeing deaths) only
// when a line is not there within HostCall::spin. The result, the flags and
// the errors are those of the program; only when data moves differs.
struct OneShotShape {
  int nranks = 0;
  std::size_t offset = 0;  // of the data in every window slot
  std::size_t bytes = 0;
  std::size_t elements = 0;  // bytes / the element size
  std::size_t lines = 0;     // offset of the line region; 0: the data goes to `offset`
};
// Whether a one-shot of `bytes` at window offset `offset` pays to move in line
// flags: larger than the flag line holds, small enough that one cache-line
// round trip is a good part of its time (comm-bench --algo mem_oneshot, 2
// ranks, side by side: 1 KiB 0.64-0.71 us against 0.84-0.91, 2 KiB 0.92-1.15
// against 1.37-1.39; with the region doubled, 4 KiB took 1.65-1.71 against 1.54).
constexpr bool one_shot_in_lines(std::size_t offset, std::size_t bytes) noexcept {
  return offset != kDirectFlagBytes && bytes > 0 && bytes <= kDirectLineMaxBytes;
}
// The shape of `program` (rank `rank` of `nranks`, elements of `elem_size`
// bytes) if its operations are exactly those.
std::optional<OneShotShape> one_shot_shape(const DirectProgram& program, int rank, int nranks, std::size_t elem_size);
// Runs such a program exactly as run_on_host would (same order of loads,
// stores, flags and checks; same errors).
void run_one_shot_on_host(const OneShotShape& shape, DirectMemory& memory, const HostCall& call);

// dst = srcs[0] (op) srcs[1] (op) ... elementwise, in order; dst (and dst2) may
// coincide exactly with any source. `bytes` is a multiple of the element size.
void reduce_in_order(std::byte* dst, std::byte* dst2, const std::byte* const* srcs, std::size_t nsrcs,
                     std::size_t bytes, DataType dtype, ReduceOp op);

}  // namespace comm::direct
