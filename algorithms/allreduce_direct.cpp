// Direct ("one-shot") all-reduce: every rank sends its whole input to every
// other rank and reduces the n buffers locally in rank order 0..n-1. One
// latency deep, so it wins small (decode-sized) messages; it moves n-1 full
// copies per port, so it loses large ones. Every rank folds the same operands
// in the same order, so all ranks hold identical bits.

#include "algorithms/builders.hpp"

namespace comm::algo {

void build_allreduce_direct(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0) return;
  const int n = a.nranks;
  const auto nn = static_cast<std::size_t>(n);
  const auto r = static_cast<std::size_t>(a.rank);
  const std::size_t count = a.count;
  const Region input = in_region(0, count);
  std::vector<StepId> sends;
  for (int k = 1; k < n; ++k) sends.push_back(b.send(mod(a.rank + k, n), input, 0));
  std::vector<Region> x(nn);
  std::vector<StepId> ready(nn, kNoStep);
  for (int k = 1; k < n; ++k) {
    const auto j = static_cast<std::size_t>(mod(a.rank - k, n));
    x[j] = scratch_region(j * count, count);
    ready[j] = b.recv(static_cast<int>(j), x[j], 0);
  }
  x[r] = input;
  // The final write of the output waits for our sends: in place, they read it.
  fold_in_order(b, x, ready, scratch_region(r * count, count), out_region(0, count), sends);
  if (n > 1) b.need_scratch(nn * count);
}

}  // namespace comm::algo
