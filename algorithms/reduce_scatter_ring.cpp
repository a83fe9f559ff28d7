// Ring reduce-scatter: n-1 steps around the ring; at each step every rank
// passes one block's partial sum to its successor, which adds its own input.
// Blocks are cut into chunks so step s+1 of chunk c starts while later chunks
// of step s are still in flight (pipelining). Bandwidth-optimal: each rank
// sends and receives (n-1)/n of the data.

#include "algorithms/builders.hpp"

namespace comm::algo {

std::size_t ring_reduce_scatter_scratch(const BlockLayout& L, int n) {
  return static_cast<std::size_t>(n - 1) * L.max_len();
}

RingReduceScatterResult ring_reduce_scatter(ScheduleBuilder& b, const RingView& ring, const BlockLayout& L,
                                            const Chunking& ch, int shift, std::size_t scratch_base,
                                            std::size_t tag_base,
                                            const std::vector<std::vector<StepId>>* input_ready) {
  const int n = ring.n;
  const std::size_t slot = L.max_len();
  RingReduceScatterResult R;
  R.input_read.assign(static_cast<std::size_t>(n), std::vector<StepId>(ch.chunks, kNoStep));
  R.owned_done.assign(ch.chunks, kNoStep);
  // The reduction that produced chunk c of the block sent at the next step.
  std::vector<StepId> partial(ch.chunks, kNoStep);
  const auto ready = [input_ready](std::size_t blk, std::size_t c) { return input_ready ? (*input_ready)[blk][c] : kNoStep; };
  for (int s = 0; s + 1 < n; ++s) {
    const auto send_blk = static_cast<std::size_t>(mod(ring.pos + shift - s, n));
    const auto recv_blk = static_cast<std::size_t>(mod(ring.pos + shift - s - 1, n));
    const bool last = s + 2 == n;
    const std::size_t send_slot = scratch_base + static_cast<std::size_t>(s - 1) * slot;
    const std::size_t recv_slot = scratch_base + static_cast<std::size_t>(s) * slot;
    for (std::size_t c = 0; c < ch.chunks; ++c) {
      const std::uint32_t tag = checked_tag(tag_base + static_cast<std::size_t>(s) * ch.chunks + c);
      const std::size_t at = ch.begin(c);
      if (const std::size_t len = ch.len(L.len[send_blk], c)) {
        if (s == 0)
          R.input_read[send_blk][c] = b.send(ring.next, L.in(send_blk, at, len), tag, Deps{ready(send_blk, c)});
        else
          b.send(ring.next, scratch_region(send_slot + at, len), tag, {partial[c]});
      }
      if (const std::size_t len = ch.len(L.len[recv_blk], c)) {
        const Region tmp = scratch_region(recv_slot + at, len);
        const StepId got = b.recv(ring.prev, tmp, tag);
        // (partial of the ranks before us) (op) (our input): every element is
        // folded in ring order starting at the block's first sender, by
        // exactly one rank, so the result is the same wherever it is read.
        const Region dst = last ? L.out(recv_blk, at, len) : tmp;
        const StepId red = b.reduce(dst, tmp, L.in(recv_blk, at, len), Deps{got, ready(recv_blk, c)});
        R.input_read[recv_blk][c] = red;
        partial[c] = red;
        if (last) R.owned_done[c] = red;
      }
    }
  }
  return R;
}

void build_reduce_scatter_ring(const AlgoArgs& a, ScheduleBuilder& b) {
  if (build_trivial_reduction(a, b)) return;
  // Blocks in ring order: position p's block is the input block of the rank there.
  const std::vector<int> order = node_aware_order(a);
  BlockLayout L = BlockLayout::uniform(a.count, a.nranks, true, false);
  for (std::size_t p = 0; p < order.size(); ++p) L.in_off[p] = static_cast<std::size_t>(order[p]) * a.count;
  const Chunking ch = plan_chunks(a.count, a.chunk_elems, static_cast<std::size_t>(a.nranks - 1));
  // shift -1: position p ends owning block p, its own output block.
  ring_reduce_scatter(b, RingView::of_order(order, a.rank), L, ch, -1, 0, 0);
  b.need_scratch(ring_reduce_scatter_scratch(L, a.nranks));
}

}  // namespace comm::algo
