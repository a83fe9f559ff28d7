// Binomial-tree broadcast, pipelined in chunks: a node forwards chunk c to its
// children as soon as it arrived. log2(n) latencies deep; each node sends at
// most log2(n) copies, to the deepest subtree first so it starts earliest.

#include "algorithms/builders.hpp"

namespace comm::algo {

void tree_broadcast(ScheduleBuilder& b, int parent, const std::vector<int>& kids, std::size_t count,
                    const Chunking& ch, const TreeBroadcastSpec& spec, std::size_t tag_base) {
  for (std::size_t c = 0; c < ch.chunks; ++c) {
    const std::size_t at = ch.begin(c);
    const std::size_t len = ch.len(count, c);
    const std::uint32_t tag = checked_tag(tag_base + c);
    // The root sends from its source and never writes (a broadcast root's output is its input).
    Region src = sub(spec.root_src, at, len);
    StepId have = spec.root_ready ? (*spec.root_ready)[c] : kNoStep;
    if (parent >= 0) {
      src = out_region(at, len);
      have = b.recv(parent, src, tag, Deps{spec.write_guard ? (*spec.write_guard)[c] : kNoStep});
    }
    for (int kid : kids) b.send(kid, src, tag, Deps{have});
  }
}

void build_broadcast_tree(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0 || a.nranks == 1) return;
  const int n = a.nranks;
  const int v = relative(a.rank, a.root, n);
  // Deepest subtree first, so it starts earliest.
  std::vector<int> kids;
  for (int kid : binomial_children(v, n)) kids.insert(kids.begin(), absolute(kid, a.root, n));
  TreeBroadcastSpec spec;
  spec.root_src = in_region(0, a.count);
  tree_broadcast(b, v == 0 ? -1 : absolute(binomial_parent(v), a.root, n), kids, a.count,
                 plan_chunks(a.count, a.chunk_elems, 1), spec, 0);
}

}  // namespace comm::algo
