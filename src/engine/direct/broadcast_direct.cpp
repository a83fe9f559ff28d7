// Broadcast through peer memory: the root publishes chunk by chunk; the
// others copy each chunk out of the root's window and acknowledge it, and the
// root reuses a section only once every rank acknowledged the chunk it held.

#include "engine/direct/direct_builders.hpp"

namespace comm::direct {

bool eligible_broadcast_direct(const DirectArgs& a) { return chunks_fit(a, 1, 1); }

void build_broadcast_direct(const DirectArgs& a, ProgramBuilder& b) {
  using B = ProgramBuilder;
  const std::size_t e = a.elem_size;
  const Chunks c(a.count, 1, e, a.window_bytes);
  for (std::size_t k = 0; k < c.size(); ++k) {
    if (a.rank == a.root) {
      // Step k+1 of every rank is chunk k: published (root) or copied (the others).
      if (k >= kSections) b.wait_all(static_cast<std::uint32_t>(k - kSections + 1));
      b.copy(B::window(a.rank, c.at(k, 0)), B::input(c.begin(k) * e), c.len(k) * e);
      b.signal();
    } else {
      b.wait(a.root, static_cast<std::uint32_t>(k + 1));
      b.copy(B::output(c.begin(k) * e), B::window(a.root, c.at(k, 0)), c.len(k) * e);
      b.signal();
    }
  }
}

}  // namespace comm::direct
