// Ring all-gather: n-1 steps; at each step every rank forwards to its
// successor the block it received at the previous step. Chunked so that a
// chunk is forwarded as soon as it arrives. Each rank sends and receives
// (n-1)/n of the result.

#include "algorithms/builders.hpp"

namespace comm::algo {

std::vector<std::vector<StepId>> ring_allgather(ScheduleBuilder& b, const RingView& ring, const BlockLayout& L,
                                                const Chunking& ch, const RingAllgatherSpec& spec,
                                                std::size_t tag_base) {
  const int n = ring.n;
  const int held = ring.pos + spec.shift;
  const bool is_holder = spec.holder == ring.pos;
  // Nobody sends to the holder: it has every block already.
  const bool next_is_holder = spec.holder >= 0 && spec.holder == mod(ring.pos + 1LL, n);
  std::vector<StepId> arrived(ch.chunks, kNoStep);  // receive of chunk c at the previous step
  std::vector<std::vector<StepId>> received(static_cast<std::size_t>(n), std::vector<StepId>(ch.chunks, kNoStep));
  for (int s = 0; s + 1 < n; ++s) {
    const auto send_blk = static_cast<std::size_t>(mod(held - s, n));
    const auto recv_blk = static_cast<std::size_t>(mod(held - s - 1, n));
    for (std::size_t c = 0; c < ch.chunks; ++c) {
      const std::uint32_t tag = checked_tag(tag_base + static_cast<std::size_t>(s) * ch.chunks + c);
      const std::size_t at = ch.begin(c);
      if (const std::size_t len = ch.len(L.len[send_blk], c); len && !next_is_holder) {
        Deps d;
        Region src = L.out(send_blk, at, len);
        if (is_holder) {
          src = L.in(send_blk, at, len);
        } else if (s == 0) {
          if (spec.own_from_input) src = L.in(send_blk, at, len);
          if (spec.own_ready) d.add((*spec.own_ready)[c]);
        } else {
          d.add(arrived[c]);
        }
        b.send(ring.next, src, tag, d);
      }
      if (const std::size_t len = ch.len(L.len[recv_blk], c); len && !is_holder) {
        Deps d;
        if (spec.write_guard) d.add((*spec.write_guard)[recv_blk][c]);
        arrived[c] = b.recv(ring.prev, L.out(recv_blk, at, len), tag, d);
        received[recv_blk][c] = arrived[c];
      }
    }
  }
  return received;
}

void build_allgather_ring(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0) return;
  // Blocks in ring order: position p holds the output block of the rank there.
  const std::vector<int> order = node_aware_order(a);
  BlockLayout L = BlockLayout::uniform(a.count, a.nranks, false, true);
  for (std::size_t p = 0; p < order.size(); ++p) L.out_off[p] = static_cast<std::size_t>(order[p]) * a.count;
  b.copy(out_region(static_cast<std::size_t>(a.rank) * a.count, a.count), in_region(0, a.count));
  if (a.nranks == 1) return;
  const Chunking ch = plan_chunks(a.count, a.chunk_elems, static_cast<std::size_t>(a.nranks - 1));
  RingAllgatherSpec spec;
  spec.own_from_input = true;  // the local copy and the first send overlap
  ring_allgather(b, RingView::of_order(order, a.rank), L, ch, spec, 0);
}

}  // namespace comm::algo
