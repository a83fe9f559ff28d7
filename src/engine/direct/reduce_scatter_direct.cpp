// Reduce-scatter through peer memory: every rank publishes the blocks meant
// for the others (chunk k of each), and rank r reduces chunk k of block r out
// of every window, in rank order, straight into its output. Chunked through
// three sections and pipelined like the two-shot all-reduce.

#include "engine/direct/direct_builders.hpp"

namespace comm::direct {

bool eligible_reduce_scatter_direct(const DirectArgs& a) {
  return chunks_fit(a, static_cast<std::size_t>(a.nranks), 1);
}

void build_reduce_scatter_direct(const DirectArgs& a, ProgramBuilder& b) {
  using B = ProgramBuilder;
  const auto n = static_cast<std::size_t>(a.nranks);
  const auto r = static_cast<std::size_t>(a.rank);
  const std::size_t e = a.elem_size;
  const Chunks c(a.count, n, e, a.window_bytes);
  std::vector<DirectRef> srcs(n);
  pipeline(b, c.size(), [&](std::size_t k) { return publish_blocks(b, a, c, k); }, [&](std::size_t k) {
    for (std::size_t p = 0; p < n; ++p)
      srcs[p] = p == r ? B::input((r * a.count + c.begin(k)) * e) : B::window(static_cast<int>(p), c.at(k, r));
    b.reduce(B::output(c.begin(k) * e), srcs, c.len(k) * e);
  });
}

}  // namespace comm::direct
