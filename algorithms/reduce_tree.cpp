// Binomial-tree reduce, pipelined in chunks: every node folds its input with
// the partials of its children and passes the result to its parent. log2(n)
// latencies deep. Children are folded in increasing position order, and a
// child's subtree covers the contiguous positions after the previous one, so
// every chunk is reduced in position order root, root+1, ... with a fixed
// bracketing: deterministic whatever the arrival order.

#include "algorithms/builders.hpp"

namespace comm::algo {

void build_reduce_tree(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0) return;
  const int n = a.nranks;
  const std::size_t count = a.count;
  if (n == 1) {
    b.copy(out_region(0, count), in_region(0, count));
    return;
  }
  const int v = relative(a.rank, a.root, n);
  const std::vector<int> kids = binomial_children(v, n);
  const Chunking ch = plan_chunks(count, a.chunk_elems, 1);
  for (std::size_t c = 0; c < ch.chunks; ++c) {
    const std::size_t at = ch.begin(c);
    const std::size_t len = ch.len(count, c);
    const std::uint32_t tag = checked_tag(c);
    std::vector<Region> x{in_region(at, len)};
    std::vector<StepId> ready{kNoStep};
    for (std::size_t k = 0; k < kids.size(); ++k) {
      x.push_back(scratch_region(k * count + at, len));
      ready.push_back(b.recv(absolute(kids[k], a.root, n), x.back(), tag));
    }
    if (v == 0) {
      fold_in_order(b, x, ready, x[1], out_region(at, len), {});
    } else if (kids.empty()) {
      b.send(absolute(binomial_parent(v), a.root, n), x[0], tag);
    } else {
      // Non-roots must not touch the output: the partial stays in scratch.
      const StepId done = fold_in_order(b, x, ready, x[1], x[1], {});
      b.send(absolute(binomial_parent(v), a.root, n), x[1], tag, {done});
    }
  }
  b.need_scratch(kids.size() * count);
}

}  // namespace comm::algo
