// Two-shot all-reduce that reads the peers' own buffers (DirectSpace::
// peer_input/peer_output, through DirectMemory::peer_reads(): on host shared
// memory one process_vm_readv each) instead of staging them in windows:
//   1. signal (the executor has published this rank's buffer addresses); wait for everyone's;
//   2. rank r copies block r of every peer's input into its private scratch,
//      chunk by chunk, and folds all n blocks, in rank order, into
//      block r of its output; signal 2, wait for everyone's;
//   3. it copies every other reduced block p straight out of rank p's output;
//      signal 3, wait for everyone's, so that no rank returns (and lets its
//      caller reuse the buffers) while a peer may still be reading them.
// Each byte of a peer is moved once per shot, as by a ring over cross-memory
// reads, instead of mem_twoshot's publish + gather through windows: about
// half the bytes, for three flag latencies and 2(n-1) reads per call.
//
// Every element is folded in rank order, as by mem_twoshot (whose blocks are
// cut per chunk instead), so both give identical bits. In place (input == output) is safe: in step 2 rank p reads only
// block p of the others' inputs, which their owners overwrite only in step 3,
// after they saw p's signal 2; a rank writes its own block r in step 2, which
// no peer reads before signal 2.

#include "engine/direct/direct_builders.hpp"

namespace comm::direct {
namespace {

// Scratch per chunk (all the peers' pieces together): large enough that one
// read's fixed cost is amortised, small enough to stay in cache for the fold.
constexpr std::size_t kPeerChunk = std::size_t{256} << 10;
constexpr std::size_t kLine = 64;

// Elements of one peer's piece of a chunk (a multiple of a cache line), or 0 if the window is too small.
std::size_t piece_elems(const DirectArgs& a) {
  if (a.nranks < 2 || a.window_bytes <= kDirectPeerDataOffset) return 0;
  const std::size_t room = std::min(a.window_bytes - kDirectPeerDataOffset, kPeerChunk);
  const std::size_t piece = room / static_cast<std::size_t>(a.nranks - 1) / kLine * kLine;
  return piece / a.elem_size;
}

}  // namespace

bool eligible_allreduce_peer_twoshot(const DirectArgs& a) {
  return a.nranks == 1 || (a.peer_reads && piece_elems(a) > 0);
}

void build_allreduce_peer_twoshot(const DirectArgs& a, ProgramBuilder& b) {
  using B = ProgramBuilder;
  const auto n = static_cast<std::size_t>(a.nranks);
  const auto r = static_cast<std::size_t>(a.rank);
  const std::size_t e = a.elem_size;
  if (n == 1) {
    b.copy(B::output(0), B::input(0), a.count * e);
    return;
  }
  b.wait_all(b.signal());
  const std::size_t per = piece_elems(a);
  const std::size_t mine = block_offset(a.count, n, r), my_len = block_size(a.count, n, r);
  // Rank p's piece of the scratch (this rank's own has none).
  auto scratch = [&](std::size_t p) { return (p < r ? p : p - 1) * per * e; };
  std::vector<DirectRef> srcs(n);
  for (std::size_t at = 0; at < my_len; at += per) {
    const std::size_t len = std::min(per, my_len - at) * e, from = (mine + at) * e;
    for (std::size_t p = 0; p < n; ++p) {
      if (p == r) {
        srcs[p] = B::input(from);
        continue;
      }
      srcs[p] = B::scratch(scratch(p));
      b.copy(srcs[p], B::peer_input(static_cast<int>(p), from), len);
    }
    b.reduce(B::output(from), srcs, len);
  }
  b.wait_all(b.signal());
  for (std::size_t p = 0; p < n; ++p)
    if (p != r) {
      const std::size_t from = block_offset(a.count, n, p) * e;
      b.copy(B::output(from), B::peer_output(static_cast<int>(p), from), block_size(a.count, n, p) * e);
    }
  b.wait_all(b.signal());
}

}  // namespace comm::direct
