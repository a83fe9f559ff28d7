// Scatter + all-gather broadcast (van de Geijn): the root sends block j of n
// balanced blocks to position j, then a ring all-gather spreads the blocks.
// Every port carries about 2(n-1)/n of the data instead of the whole buffer
// per tree level, so it wins large broadcasts. The scatter is direct (n-1
// messages from the root) rather than binomial: the root's send port carries
// the same (n-1)/n of the data either way, and this broadcast only pays off at
// sizes where bandwidth, not latency, decides.
//
// The root already holds every block, so it only sends in the ring and its
// predecessor never sends to it (the root must not write its buffer).

#include "algorithms/builders.hpp"

namespace comm::algo {

void build_broadcast_scatter_allgather(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0 || a.nranks == 1) return;
  const int n = a.nranks;
  const int v = relative(a.rank, a.root, n);
  const BlockLayout L = BlockLayout::balanced(a.count, n);  // block j belongs to position j
  const Chunking ch = plan_chunks(L.max_len(), a.chunk_elems, static_cast<std::size_t>(n));
  std::vector<StepId> scattered(ch.chunks, kNoStep);
  for (std::size_t c = 0; c < ch.chunks; ++c) {
    const std::uint32_t tag = checked_tag(c);
    const std::size_t at = ch.begin(c);
    if (v == 0) {
      for (int j = 1; j < n; ++j) {
        const auto jj = static_cast<std::size_t>(j);
        if (const std::size_t len = ch.len(L.len[jj], c))
          b.send(absolute(j, a.root, n), in_region(L.in_off[jj] + at, len), tag);
      }
    } else if (const std::size_t len = ch.len(L.len[static_cast<std::size_t>(v)], c)) {
      scattered[c] = b.recv(a.root, out_region(L.out_off[static_cast<std::size_t>(v)] + at, len), tag);
    }
  }
  const RingView ring{v, n, absolute(v + 1, a.root, n), absolute(v - 1, a.root, n)};
  RingAllgatherSpec spec;
  spec.own_ready = &scattered;
  spec.holder = 0;
  ring_allgather(b, ring, L, ch, spec, ch.chunks);
}

}  // namespace comm::algo
