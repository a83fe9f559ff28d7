// Binomial-tree broadcast, pipelined in chunks: a node forwards chunk c to its
// children as soon as it arrived. log2(n) latencies deep; each node sends at
// most log2(n) copies, to the deepest subtree first so it starts earliest.

#include "algorithms/builders.hpp"

namespace comm::algo {

void build_broadcast_tree(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0 || a.nranks == 1) return;
  const int n = a.nranks;
  const int v = relative(a.rank, a.root, n);
  std::vector<int> kids = binomial_children(v, n);
  const Chunking ch = plan_chunks(a.count, a.chunk_elems, 1);
  for (std::size_t c = 0; c < ch.chunks; ++c) {
    const std::size_t at = ch.begin(c);
    const std::size_t len = ch.len(a.count, c);
    const std::uint32_t tag = checked_tag(c);
    // The root sends from its input and never writes (its output is its input).
    Region src = in_region(at, len);
    StepId have = kNoStep;
    if (v != 0) {
      src = out_region(at, len);
      have = b.recv(absolute(binomial_parent(v), a.root, n), src, tag);
    }
    for (auto it = kids.rbegin(); it != kids.rend(); ++it)
      b.send(absolute(*it, a.root, n), src, tag, Deps{have});
  }
}

}  // namespace comm::algo
