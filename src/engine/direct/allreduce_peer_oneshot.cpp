// One-shot all-reduce that reads the peers' own buffers (DirectSpace::
// peer_input, through DirectMemory::peer_reads(): on host shared memory one
// process_vm_readv per peer):
//   1. signal (the executor has published this rank's buffer addresses); wait for everyone's;
//   2. copy every peer's whole input into this rank's private scratch; signal 2,
//      wait for everyone's: from here on nobody reads this rank's buffers;
//   3. fold all n inputs, in rank order, into the output.
// Each rank reads n-1 inputs in n-1 system calls, for two flag latencies: no
// staging copy into a window, no gather, and no trailing wait (the last reads
// of this rank's buffers ended before signal 2), so in place is safe: the
// output is written only after every peer finished reading the input. The
// scratch holds every peer's input at once; it is kept to a window's size, so
// this is for messages of up to a window / (n-1). The fold is mem_oneshot's,
// so the bits are identical.

#include "engine/direct/direct_builders.hpp"

namespace comm::direct {
namespace {

constexpr std::size_t kLine = 64;

// Bytes of one peer's piece of the scratch (whole cache lines).
std::size_t piece_bytes(std::size_t bytes) { return (bytes + kLine - 1) / kLine * kLine; }

}  // namespace

bool peer_fold_fits(const DirectArgs& a, std::size_t bytes) {
  if (a.nranks == 1) return true;
  return a.peer_reads && a.window_bytes >= kDirectPeerDataOffset &&
         piece_bytes(bytes) * static_cast<std::size_t>(a.nranks - 1) <= a.window_bytes - kDirectPeerDataOffset;
}

void build_peer_fold(const DirectArgs& a, ProgramBuilder& b, std::size_t from, std::size_t bytes) {
  using B = ProgramBuilder;
  if (a.nranks == 1) {
    b.copy(B::output(0), B::input(from), bytes);
    return;
  }
  b.wait_all(b.signal());
  std::vector<DirectRef> srcs;
  std::size_t at = 0;
  for (int p = 0; p < a.nranks; ++p) {
    if (p == a.rank) {
      srcs.push_back(B::input(from));
      continue;
    }
    srcs.push_back(B::scratch(at));
    b.copy(srcs.back(), B::peer_input(p, from), bytes);
    at += piece_bytes(bytes);
  }
  b.wait_all(b.signal());
  b.reduce(B::output(0), srcs, bytes);
}

bool eligible_allreduce_peer_oneshot(const DirectArgs& a) { return peer_fold_fits(a, a.count * a.elem_size); }

void build_allreduce_peer_oneshot(const DirectArgs& a, ProgramBuilder& b) {
  build_peer_fold(a, b, 0, a.count * a.elem_size);
}

}  // namespace comm::direct
