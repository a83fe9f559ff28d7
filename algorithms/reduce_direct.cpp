// Direct reduce: every rank sends its input to the root, which folds the n
// buffers in rank order 0..n-1. One latency deep; the root's receive port
// carries n-1 copies, so it suits small messages.

#include "algorithms/builders.hpp"

namespace comm::algo {

void build_reduce_direct(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0) return;
  const std::size_t count = a.count;
  const Region input = in_region(0, count);
  if (a.rank != a.root) {
    b.send(a.root, input, 0);
    return;
  }
  const auto nn = static_cast<std::size_t>(a.nranks);
  const auto root = static_cast<std::size_t>(a.root);
  std::vector<Region> x(nn);
  std::vector<StepId> ready(nn, kNoStep);
  for (int k = 1; k < a.nranks; ++k) {
    const auto j = static_cast<std::size_t>(mod(a.root + k, a.nranks));
    x[j] = scratch_region(j * count, count);
    ready[j] = b.recv(static_cast<int>(j), x[j], 0);
  }
  x[root] = input;
  fold_in_order(b, x, ready, scratch_region(root * count, count), out_region(0, count), {});
  if (nn > 1) b.need_scratch(nn * count);
}

}  // namespace comm::algo
