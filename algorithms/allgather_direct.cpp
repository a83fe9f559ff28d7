// Direct all-gather: one round; every rank sends its block to every other
// rank. One latency deep; the send port carries (n-1) copies of the block.

#include "algorithms/builders.hpp"

namespace comm::algo {

void direct_allgather(ScheduleBuilder& b, int rank, int n, const BlockLayout& L, Region own, StepId own_ready,
                      const std::vector<StepId>* write_guard, std::uint32_t tag) {
  if (own.count)
    for (int k = 1; k < n; ++k) b.send(mod(rank + k, n), own, tag, Deps{own_ready});
  for (int k = 1; k < n; ++k) {
    const auto j = static_cast<std::size_t>(mod(rank - k, n));
    if (L.len[j] == 0) continue;
    Deps d;
    if (write_guard) d.add((*write_guard)[j]);
    b.recv(static_cast<int>(j), out_region(L.out_off[j], L.len[j]), tag, d);
  }
}

void build_allgather_direct(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0) return;
  const BlockLayout L = BlockLayout::uniform(a.count, a.nranks, false, true);
  const auto r = static_cast<std::size_t>(a.rank);
  b.copy(out_region(L.out_off[r], a.count), in_region(0, a.count));
  direct_allgather(b, a.rank, a.nranks, L, in_region(0, a.count), kNoStep, nullptr, 0);
}

}  // namespace comm::algo
