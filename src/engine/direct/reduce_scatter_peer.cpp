// Reduce-scatter that reads the peers' own buffers: rank r copies block r of
// every peer's input into private scratch (one read each), signals "done
// reading", waits for everyone's, then folds the n blocks in rank order into
// its output — mem_peer_oneshot's program on block r (allreduce_peer_oneshot.cpp).
// In place (the output is block r of the input) is safe: peers read only the
// other blocks, and the fold comes after their reads anyway.

#include "engine/direct/direct_builders.hpp"

namespace comm::direct {

bool eligible_reduce_scatter_peer(const DirectArgs& a) { return peer_fold_fits(a, a.count * a.elem_size); }

void build_reduce_scatter_peer(const DirectArgs& a, ProgramBuilder& b) {
  const std::size_t bytes = a.count * a.elem_size;
  build_peer_fold(a, b, static_cast<std::size_t>(a.rank) * bytes, bytes);
}

}  // namespace comm::direct
