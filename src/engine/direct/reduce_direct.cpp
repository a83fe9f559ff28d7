// Reduce through peer memory: every rank but the root publishes its input
// chunk by chunk; the root folds chunk k of every window (its own input in
// its place) in rank order into its output, and signals, so that the others
// reuse a section only once the root has read the chunk it held.

#include "engine/direct/direct_builders.hpp"

namespace comm::direct {

bool eligible_reduce_direct(const DirectArgs& a) { return chunks_fit(a, 1, 1); }

void build_reduce_direct(const DirectArgs& a, ProgramBuilder& b) {
  using B = ProgramBuilder;
  const auto n = static_cast<std::size_t>(a.nranks);
  const std::size_t e = a.elem_size;
  const Chunks c(a.count, 1, e, a.window_bytes);
  std::vector<DirectRef> srcs(n);
  for (std::size_t k = 0; k < c.size(); ++k) {
    // Step k+1 of every rank is chunk k: published (the others) or reduced (root).
    if (a.rank == a.root) {
      b.wait_all(static_cast<std::uint32_t>(k + 1));
      for (std::size_t p = 0; p < n; ++p)
        srcs[p] = static_cast<int>(p) == a.root ? B::input(c.begin(k) * e) : B::window(static_cast<int>(p), c.at(k, 0));
      b.reduce(B::output(c.begin(k) * e), srcs, c.len(k) * e);
    } else {
      if (k >= kSections) b.wait(a.root, static_cast<std::uint32_t>(k - kSections + 1));
      b.copy(B::window(a.rank, c.at(k, 0)), B::input(c.begin(k) * e), c.len(k) * e);
    }
    b.signal();
  }
}

}  // namespace comm::direct
