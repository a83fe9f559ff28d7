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
  auto publish = [&](std::size_t k) {
    for (std::size_t p = 0; p < n; ++p)
      if (p != r) b.copy(B::window(a.rank, c.at(k, p)), B::input((p * a.count + c.begin(k)) * e), c.len(k) * e);
    return b.signal();
  };
  std::uint32_t published = publish(0);
  for (std::size_t k = 0; k < c.size(); ++k) {
    b.wait_all(published);
    // Own block first: in place, the output block r is the input block r.
    b.copy(B::output((r * a.count + c.begin(k)) * e), B::input((r * a.count + c.begin(k)) * e), c.len(k) * e);
    if (k + 1 < c.size()) published = publish(k + 1);
    for (std::size_t p = 0; p < n; ++p)
      if (p != r)
        b.copy(B::output((p * a.count + c.begin(k)) * e), B::window(static_cast<int>(p), c.at(k, r)), c.len(k) * e);
  }
}

}  // namespace comm::direct
