// Hierarchical all-reduce, leader variant (the small-message one): the
// ranks of each host reduce to their host's leader (its lowest rank) along a
// binomial tree, the leaders exchange their hosts' partials directly (one
// inter-host latency; every leader folds them in host order), and each
// leader broadcasts the result down the same tree. Only one message per
// chunk crosses between any two hosts, so it pays where inter-host latency
// dominates (decode-sized messages on several hosts). Pipelined in chunks.
// Every leader folds the same partials in the same order and the others
// receive copies, so all ranks hold identical bits.

#include "algorithms/hierarchy.hpp"

namespace comm::algo {

void build_allreduce_hierarchical(const AlgoArgs& a, const HostPlace& at, ScheduleBuilder& b) {
  const HostGroups& h = at.hosts;
  const int g = at.host, H = at.num_hosts;
  const TreeLinks tree = binomial_over(at.members, 0, at.local);
  const std::size_t count = a.count;
  const Chunking ch = plan_chunks(count, a.chunk_elems, 3);
  const Region out = out_region(0, count);

  // 1. Up the host's tree; the leader's host partial lands in its output.
  const TreeReduceResult up = tree_reduce(b, tree.parent, tree.kids, count, ch, out, 0, 0);
  std::vector<StepId> ready = up.done;
  // 2. Leaders only: every host partial to every other leader, folded in host order.
  if (tree.parent < 0 && H > 1) {
    const std::size_t base = tree.kids.size() * count;
    for (std::size_t c = 0; c < ch.chunks; ++c) {
      const std::size_t at = ch.begin(c), len = ch.len(count, c);
      const std::uint32_t tag = checked_tag(ch.chunks + c);
      const Region own = sub(out, at, len);
      std::vector<StepId> sends;
      for (int k = 1; k < H; ++k) sends.push_back(b.send(h.member(mod(g + k, H), 0), own, tag, {up.done[c]}));
      std::vector<Region> x(static_cast<std::size_t>(H));
      std::vector<StepId> got(static_cast<std::size_t>(H), kNoStep);
      for (int k = 1; k < H; ++k) {
        const auto o = static_cast<std::size_t>(mod(g - k, H));
        x[o] = scratch_region(base + o * count + at, len);
        got[o] = b.recv(h.member(static_cast<int>(o), 0), x[o], tag);
      }
      x[static_cast<std::size_t>(g)] = own;
      got[static_cast<std::size_t>(g)] = up.done[c];
      // Our own slot is free: it holds the running partial. The final write
      // of the output waits for the sends that read it.
      ready[c] = fold_in_order(b, x, got, scratch_region(base + static_cast<std::size_t>(g) * count + at, len), own,
                               sends);
    }
    b.need_scratch(base + static_cast<std::size_t>(H) * count);
  }
  // 3. Down the host's tree. In place, a rank's output chunk is its input
  // chunk: receive into it only after the reduction read it.
  std::vector<int> down(tree.kids.rbegin(), tree.kids.rend());
  TreeBroadcastSpec spec;
  spec.root_src = out;
  spec.root_ready = &ready;
  spec.write_guard = &up.input_read;
  tree_broadcast(b, tree.parent, down, count, ch, spec, 2 * ch.chunks);
}

}  // namespace comm::algo
