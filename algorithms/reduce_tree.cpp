// Binomial-tree reduce, pipelined in chunks: every node folds its input with
// the partials of its children and passes the result to its parent. log2(n)
// latencies deep. Children are folded in increasing position order, and a
// child's subtree covers the contiguous positions after the previous one, so
// every chunk is reduced in position order root, root+1, ... with a fixed
// bracketing: deterministic whatever the arrival order.

#include "algorithms/builders.hpp"

namespace comm::algo {

TreeReduceResult tree_reduce(ScheduleBuilder& b, int parent, const std::vector<int>& kids, std::size_t count,
                             const Chunking& ch, Region root_dst, std::size_t scratch_base, std::size_t tag_base) {
  TreeReduceResult R;
  R.done.assign(ch.chunks, kNoStep);
  R.input_read.assign(ch.chunks, kNoStep);
  for (std::size_t c = 0; c < ch.chunks; ++c) {
    const std::size_t at = ch.begin(c);
    const std::size_t len = ch.len(count, c);
    const std::uint32_t tag = checked_tag(tag_base + c);
    std::vector<Region> x{in_region(at, len)};
    std::vector<StepId> ready{kNoStep};
    for (std::size_t k = 0; k < kids.size(); ++k) {
      x.push_back(scratch_region(scratch_base + k * count + at, len));
      ready.push_back(b.recv(kids[k], x.back(), tag));
    }
    if (parent < 0) {
      R.done[c] = R.input_read[c] = fold_in_order(b, x, ready, x.size() > 1 ? x[1] : x[0], sub(root_dst, at, len), {});
    } else if (kids.empty()) {
      R.done[c] = R.input_read[c] = b.send(parent, x[0], tag);
    } else {
      // Non-roots must not touch the output: the partial stays in scratch.
      R.input_read[c] = fold_in_order(b, x, ready, x[1], x[1], {});
      R.done[c] = b.send(parent, x[1], tag, {R.input_read[c]});
    }
  }
  b.need_scratch(scratch_base + kids.size() * count);
  return R;
}

void build_reduce_tree(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0) return;
  const int n = a.nranks;
  const int v = relative(a.rank, a.root, n);
  std::vector<int> kids;
  for (int kid : binomial_children(v, n)) kids.push_back(absolute(kid, a.root, n));
  const int parent = v == 0 ? -1 : absolute(binomial_parent(v), a.root, n);
  tree_reduce(b, parent, kids, a.count, plan_chunks(a.count, a.chunk_elems, 1), out_region(0, a.count), 0, 0);
}

}  // namespace comm::algo
