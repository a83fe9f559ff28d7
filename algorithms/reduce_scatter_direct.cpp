// Direct reduce-scatter: one round. Every rank sends block j of its input
// straight to rank j and folds the n contributions to its own block in rank
// order 0..n-1. One latency deep, (n-1)/n of the data on each port, but n-1
// messages in flight per rank: the choice for small and medium messages.

#include "algorithms/builders.hpp"

namespace comm::algo {

DirectReduceScatterResult direct_reduce_scatter(ScheduleBuilder& b, int rank, int n, const BlockLayout& L,
                                                std::uint32_t tag) {
  const auto r = static_cast<std::size_t>(rank);
  const auto nn = static_cast<std::size_t>(n);
  const std::size_t len = L.len[r];
  DirectReduceScatterResult R;
  R.sent.assign(nn, kNoStep);
  // Start with the successor so that the n ranks do not all target rank 0 first.
  for (int k = 1; k < n; ++k) {
    const auto j = static_cast<std::size_t>(mod(rank + k, n));
    if (L.len[j]) R.sent[j] = b.send(static_cast<int>(j), in_region(L.in_off[j], L.len[j]), tag);
  }
  if (len == 0) return R;
  std::vector<Region> x(nn);
  std::vector<StepId> ready(nn, kNoStep);
  for (int k = 1; k < n; ++k) {
    const auto j = static_cast<std::size_t>(mod(rank - k, n));
    x[j] = scratch_region(j * len, len);
    ready[j] = b.recv(static_cast<int>(j), x[j], tag);
  }
  x[r] = in_region(L.in_off[r], len);
  // Slot r of scratch is free (our own block is read from the input): it
  // holds the running partial.
  R.done = fold_in_order(b, x, ready, scratch_region(r * len, len), out_region(L.out_off[r], len), {});
  b.need_scratch(nn * len);
  return R;
}

void build_reduce_scatter_direct(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0) return;
  direct_reduce_scatter(b, a.rank, a.nranks, BlockLayout::uniform(a.count, a.nranks, true, false), 0);
}

}  // namespace comm::algo
