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
  auto publish = [&](std::size_t k) {
    for (std::size_t p = 0; p < n; ++p)
      if (p != r) b.copy(B::window(a.rank, c.at(k, p)), B::input((p * a.count + c.begin(k)) * e), c.len(k) * e);
    return b.signal();
  };
  std::uint32_t published = publish(0);
  std::vector<DirectRef> srcs(n);
  for (std::size_t k = 0; k < c.size(); ++k) {
    b.wait_all(published);
    if (k + 1 < c.size()) published = publish(k + 1);
    for (std::size_t p = 0; p < n; ++p)
      srcs[p] = p == r ? B::input((r * a.count + c.begin(k)) * e) : B::window(static_cast<int>(p), c.at(k, r));
    b.reduce(B::output(c.begin(k) * e), srcs, c.len(k) * e);
  }
}

}  // namespace comm::direct
