// All-to-all through peer memory: every rank publishes the blocks meant for
// the others (chunk k of each) and copies block r of every other rank's
// window into the output block of that rank; its own block it copies from
// its input. Chunked and pipelined like the other direct collectives.

#include "engine/direct/direct_builders.hpp"

namespace comm::direct {

bool eligible_all_to_all_direct(const DirectArgs& a) { return chunks_fit(a, static_cast<std::size_t>(a.nranks), 1); }

void build_all_to_all_direct(const DirectArgs& a, ProgramBuilder& b) {
  using B = ProgramBuilder;
  const auto n = static_cast<std::size_t>(a.nranks);
  const auto r = static_cast<std::size_t>(a.rank);
  const std::size_t e = a.elem_size;
  const Chunks c(a.count, n, e, a.window_bytes);
  pipeline(b, c.size(), [&](std::size_t k) { return publish_blocks(b, a, c, k); }, [&](std::size_t k) {
    for (std::size_t p = 0; p < n; ++p) {
      // Own block from the input (in place: the same bytes, nothing to do).
      const DirectRef src =
          p == r ? B::input((r * a.count + c.begin(k)) * e) : B::window(static_cast<int>(p), c.at(k, r));
      b.copy(B::output((p * a.count + c.begin(k)) * e), src, c.len(k) * e);
    }
  });
}

}  // namespace comm::direct
