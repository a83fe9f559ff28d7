#pragma once
/// \file direct.hpp
/// Direct-memory programs: how the ranks of one host run a collective with
/// loads and stores on each other's memory instead of messages. Every rank
/// owns windows that the others have mapped (POSIX shared memory for host
/// buffers, CUDA IPC for device buffers); a rank writes only its own window
/// and its own flag, reads anyone's, and orders the two with sequence-numbered
/// flags. An algorithm is described as one straight-line program per rank of
/// four kinds of operation — copy, reduce, signal, wait — so that
///  - the CPU executor of the core runs it over host windows,
///  - the cost model simulates all ranks' programs to predict its time, and
///  - a device executor (CUDA IPC) runs the very same program as a kernel.
///
/// Flags. Every window slot begins with one 64-bit flag word, written only by
/// its owner and never reset: call number `seq` (counted per communicator over
/// direct-memory calls, identical on every rank) uses slot seq % slots, and a
/// signal with step k stores direct_flag(seq, k). Values only grow, so a wait
/// is "flag >= value" and a late reader can never mistake an old call for the
/// current one. Data placed right after the flag word (offset 8, up to 40
/// bytes) shares its cache line, so for the smallest messages one cache-line
/// transfer carries the flag, the data and the call's signature.
///
/// Slots. A rank's program for call seq touches only slot seq % slots of every
/// window. Reusing a slot two calls later is safe without a trailing barrier
/// because every program is either *synced* (each rank waited, directly or
/// through another rank, on a signal every other rank issued in this call,
/// which that rank issued after finishing its reads of the previous call), or
/// the executor makes the next call wait for one signal of every peer of this
/// call before it writes anything (DirectProgram::synced says which).
///
/// Placement. An executor may add one offset to every window operand of a
/// call (never to the flag word, the call words or the line region), the same
/// on every rank, so that consecutive calls keep their data in different
/// lines of the slot: the CPU executor treats each slot's data region as a
/// ring and puts every call's data after the previous call's, because
/// rewriting lines that a peer's cache still holds from an earlier call costs
/// a round trip to that peer per line.
///
/// Programs are plain data, immutable once built, safe to share between threads.

#include <comm/types.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace comm {

/// Bits of a flag value below the call number: a program has fewer than 2^24 steps.
inline constexpr int kDirectStepBits = 24;
/// The flag value of `step` (1-based) of direct-memory call `seq`.
constexpr std::uint64_t direct_flag(std::uint64_t seq, std::uint32_t step) noexcept {
  return (seq << kDirectStepBits) | step;
}
/// Bytes at the start of a window slot that hold its flag word; data may start here.
inline constexpr std::size_t kDirectFlagBytes = 8;
/// Where in its slot a rank states which call it is in: a signature word
/// (collective, dtype, op, root, count, algorithm) and, after it, the call
/// number, both written when the call starts (before its first signal). A
/// peer that waited for the rank's signal, or whose wait ended because the
/// rank left, compares them with its own call and refuses to read data of a
/// different call. Data that shares the flag's cache line ends before them.
inline constexpr std::size_t kDirectSignatureOffset = 48;
inline constexpr std::size_t kDirectCallOffset = 56;
/// Where a program that reads the peers' own buffers (DirectProgram::reads_peers)
/// publishes, at call start and before its first signal, the addresses of its
/// input and output buffers as its process sees them; they sit in the slot's
/// second cache line, and such a program keeps its window data at
/// kDirectPeerDataOffset and beyond.
inline constexpr std::size_t kDirectPeerInputOffset = 64;
inline constexpr std::size_t kDirectPeerOutputOffset = 72;
inline constexpr std::size_t kDirectPeerDataOffset = 128;
/// Line flags. The last kDirectLineRegionBytes of every window slot hold a
/// call line, then lines of kDirectLineBytes whose final 8 bytes are a tag and
/// whose first kDirectLinePayload bytes are data; no program's window operands
/// reach there (the engine shrinks the windows it gives algorithms by the
/// region). An executor may publish a small one-shot input there instead of
/// copying it to the program's window offset and signalling: its call words
/// in the call line (at kDirectSignatureOffset and kDirectCallOffset, as in
/// the flag's line), then each line's data and its tag := the call number,
/// with release, then its call words in the flag's line and its signal. A
/// reader that has seen the writer's call words in the call line consumes
/// every line whose tag equals its call number, as it arrives, without
/// waiting for the whole message, then signals as the program says. The call
/// words have a line of their own so that the reader never pulls the flag's
/// line out of the writer's cache before the writer's signal: that made each
/// signal wait for one more cache-line round trip. Tags are only ever call
/// numbers (never data) and only grow, so an old line can never pass for the
/// current call's.
inline constexpr std::size_t kDirectLineBytes = 64;
inline constexpr std::size_t kDirectLinePayload = 56;
inline constexpr std::size_t kDirectLineRegionBytes = 38 * kDirectLineBytes;
/// The largest message that travels in line flags: 37 lines of 56 bytes.
inline constexpr std::size_t kDirectLineMaxBytes = 37 * kDirectLinePayload;

/// Where an operand lives.
enum class DirectSpace : std::uint8_t {
  input,   ///< the caller's input buffer
  output,  ///< the caller's output buffer
  window,  ///< `rank`'s window, in the slot of the current call
  /// `rank`'s own input / output buffer (another rank's: never this rank's),
  /// read through DirectMemory::peer_reads(). Only the source of a copy into
  /// this rank's own memory; the program must order the read after the
  /// owner's first signal (its addresses) and before the owner returns.
  peer_input,
  peer_output,
  /// This rank's private scratch memory (DirectProgram::scratch_bytes), which no
  /// other rank sees: where data read from peers' buffers lands, so that writing
  /// it never pulls cache lines out of a peer that read the window before.
  scratch,
};

/// Whether `s` is another rank's own buffer (read through DirectMemory::peer_reads()).
constexpr bool is_peer_buffer(DirectSpace s) noexcept {
  return s == DirectSpace::peer_input || s == DirectSpace::peer_output;
}

/// A byte position in one of the spaces.
struct DirectRef {
  DirectSpace space = DirectSpace::input;
  int rank = -1;            ///< owner of the window or buffer (window, peer_input, peer_output)
  std::size_t offset = 0;   ///< bytes from the start of the buffer or window slot
};

enum class DirectOpKind : std::uint8_t {
  copy,    ///< dst[0, bytes) = src[0, bytes)
  reduce,  ///< dst = srcs[0] (op) srcs[1] (op) ... in that order (elementwise, the call's op);
           ///< also written to dst2 when has_dst2. Sources may include dst itself only as srcs[0].
  signal,  ///< this rank's flag := direct_flag(seq, step), with release: everything this rank
           ///< wrote before is visible to whoever sees the flag
  wait,    ///< until `rank`'s flag >= direct_flag(seq, step), with acquire
};

/// One operation of a rank's program.
struct DirectOp {
  DirectOpKind kind = DirectOpKind::copy;
  int rank = -1;                ///< wait: whose flag
  std::uint32_t step = 0;       ///< signal/wait: 1-based step within the call
  std::uint32_t first_src = 0;  ///< copy/reduce: index into DirectProgram::srcs
  std::uint32_t num_srcs = 0;   ///< copy: 1; reduce: at least 2
  bool has_dst2 = false;        ///< reduce: also store the result at dst2
  std::size_t bytes = 0;        ///< copy/reduce extent (a multiple of the element size)
  DirectRef dst;
  DirectRef dst2;
};

/// One rank's program for one call (see the file comment).
struct DirectProgram {
  std::vector<DirectOp> ops;
  std::vector<DirectRef> srcs;
  std::size_t window_bytes = 0;  ///< bytes of this rank's window slot it writes (flag word included)
  std::uint32_t steps = 0;       ///< signals it issues (at least 1)
  /// This rank has waited, directly or transitively, on a signal of this call from every other
  /// rank (see "Slots" above). Set by the engine from all ranks' programs.
  bool synced = false;
  /// Some copy reads a peer's input or output (DirectSpace::peer_input/peer_output):
  /// the executor publishes this rank's buffer addresses before its first signal.
  bool reads_peers = false;
  std::size_t scratch_bytes = 0;  ///< bytes of DirectSpace::scratch it uses
};

}  // namespace comm
