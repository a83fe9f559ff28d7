// Pairwise-exchange all-to-all: in step s (1..n-1) rank r sends to r+s and
// receives from r-s, one step after the other. Every step is a permutation,
// so no receiver is flooded by n-1 senders at once (incast); receives are
// posted up front since they cost no bandwidth. n-1 latencies deep.

#include "algorithms/builders.hpp"

namespace comm::algo {

void build_all_to_all_pairwise(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0) return;
  const int n = a.nranks;
  const std::size_t count = a.count;
  auto block = [count](int j) { return static_cast<std::size_t>(j) * count; };
  b.copy(out_region(block(a.rank), count), in_region(block(a.rank), count));
  std::vector<StepId> got(static_cast<std::size_t>(n), kNoStep);
  for (int s = 1; s < n; ++s) {
    const int from = mod(a.rank - s, n);
    got[static_cast<std::size_t>(s)] = b.recv(from, out_region(block(from), count), 0);
  }
  StepId prev_send = kNoStep;
  for (int s = 1; s < n; ++s) {
    const int to = mod(a.rank + s, n);
    prev_send = b.send(to, in_region(block(to), count), 0, Deps{prev_send, got[static_cast<std::size_t>(s - 1)]});
  }
}

}  // namespace comm::algo
