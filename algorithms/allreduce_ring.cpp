// Ring all-reduce = ring reduce-scatter + ring all-gather, pipelined in
// chunks of args.chunk_elems (capped, see topology.hpp). Bandwidth-optimal
// (each rank sends 2(n-1)/n of the data) but 2(n-1) latencies deep, so it
// wins large messages. Each block is reduced by exactly one rank in ring
// order and then copied around, so every rank ends with identical bits.

#include "algorithms/builders.hpp"

namespace comm::algo {

void build_allreduce_ring(const AlgoArgs& a, ScheduleBuilder& b) {
  if (build_trivial_reduction(a, b)) return;
  const int n = a.nranks;
  const BlockLayout L = BlockLayout::balanced(a.count, n);
  const Chunking ch = plan_chunks(L.max_len(), a.chunk_elems, 2 * static_cast<std::size_t>(n - 1));
  const RingView ring = RingView::of_order(node_aware_order(a), a.rank);
  // shift 0: position p reduces blocks p, p-1, ... and ends owning block p+1.
  const auto rs = ring_reduce_scatter(b, ring, L, ch, 0, 0, 0);
  b.need_scratch(ring_reduce_scatter_scratch(L, n));
  RingAllgatherSpec spec;
  spec.shift = 1;
  spec.own_ready = &rs.owned_done;
  // In place, output block j is input block j: receive into it only after
  // the reduce-scatter has read that input.
  spec.write_guard = &rs.input_read;
  ring_allgather(b, ring, L, ch, spec, static_cast<std::size_t>(n - 1) * ch.chunks);
}

}  // namespace comm::algo
