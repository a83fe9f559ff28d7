// All-gather through peer memory: every rank publishes its input (chunk by
// chunk through three sections) and copies every other rank's chunk out of
// its window into the matching output block.

#include "engine/direct/direct_builders.hpp"

namespace comm::direct {

bool eligible_allgather_direct(const DirectArgs& a) { return chunks_fit(a, 1, 1); }

void build_allgather_direct(const DirectArgs& a, ProgramBuilder& b) {
  using B = ProgramBuilder;
  const auto n = static_cast<std::size_t>(a.nranks);
  const auto r = static_cast<std::size_t>(a.rank);
  const std::size_t e = a.elem_size;
  const Chunks c(a.count, 1, e, a.window_bytes);
  auto publish = [&](std::size_t k) {
    b.copy(B::window(a.rank, c.at(k, 0)), B::input(c.begin(k) * e), c.len(k) * e);
    return b.signal();
  };
  pipeline(b, c.size(), publish, [&](std::size_t k) {
    for (std::size_t p = 0; p < n; ++p) {
      const DirectRef src = p == r ? B::input(c.begin(k) * e) : B::window(static_cast<int>(p), c.at(k, 0));
      b.copy(B::output((p * a.count + c.begin(k)) * e), src, c.len(k) * e);
    }
  });
}

}  // namespace comm::direct
