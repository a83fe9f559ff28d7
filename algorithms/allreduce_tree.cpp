// Tree all-reduce: chunks are reduced up a binary tree to rank 0 and
// broadcast back down the same tree, pipelined, so the broadcast of chunk c
// overlaps the reduction of chunk c+1. log2(n) latencies deep each way, so it
// beats the ring at scale for small and medium messages.
//
// Why a binary heap tree (children 2v+1, 2v+2) and not a binomial or a
// double binary tree: in a binomial tree the root receives every chunk log2(n)
// times, which caps a pipeline at 1/log2(n) of the link; a binary tree bounds
// every node to two children, so the pipeline runs at a steady fraction of the
// link whatever n is. A double binary tree would halve per-node traffic again
// but needs two interleaved trees with their own tags and block split; the
// ring already covers the bandwidth-bound sizes, so the tree serves latency.
//
// Only rank 0 computes the final value of each chunk and everybody receives
// a copy, so all ranks hold identical bits; each node folds (own input) (op)
// (left subtree) (op) (right subtree), a fixed order.

#include "algorithms/builders.hpp"

namespace comm::algo {

void build_allreduce_tree(const AlgoArgs& a, ScheduleBuilder& b) {
  if (build_trivial_reduction(a, b)) return;
  const int v = a.rank;  // rooted at rank 0: position == rank
  const std::vector<int> kids = heap_children(v, a.nranks);
  const Chunking ch = plan_chunks(a.count, a.chunk_elems, 2);
  const std::size_t count = a.count;
  for (std::size_t c = 0; c < ch.chunks; ++c) {
    const std::size_t at = ch.begin(c);
    const std::size_t len = ch.len(count, c);
    const std::uint32_t up_tag = checked_tag(c);
    const std::uint32_t down_tag = checked_tag(ch.chunks + c);
    std::vector<Region> x{in_region(at, len)};
    std::vector<StepId> ready{kNoStep};
    for (std::size_t k = 0; k < kids.size(); ++k) {
      x.push_back(scratch_region(k * count + at, len));
      ready.push_back(b.recv(kids[k], x.back(), up_tag));
    }
    StepId result = kNoStep;  // the step after which output chunk c is final
    if (v == 0) {
      result = fold_in_order(b, x, ready, x[1], out_region(at, len), {});
    } else {
      // A leaf forwards its input as is; an inner node folds into the slot of
      // its first child.
      Region partial = x[0];
      StepId partial_ready = kNoStep;
      if (!kids.empty()) {
        partial = x[1];
        partial_ready = fold_in_order(b, x, ready, x[1], x[1], {});
      }
      const StepId up = b.send(heap_parent(v), partial, up_tag, Deps{partial_ready});
      // In place the output chunk is our input chunk, read by the fold or by
      // the send above; the send completes after both.
      result = b.recv(heap_parent(v), out_region(at, len), down_tag, {up});
    }
    for (int kid : kids) b.send(kid, out_region(at, len), down_tag, {result});
  }
  b.need_scratch(kids.size() * count);
}

}  // namespace comm::algo
