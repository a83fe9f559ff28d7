// Dissemination barrier: in round k every rank sends an empty message to
// r + 2^k and waits for one from r - 2^k before the next round. After
// ceil(log2 n) rounds every rank has heard, transitively, from every other.

#include "algorithms/builders.hpp"

namespace comm::algo {

void build_barrier_dissemination(const AlgoArgs& a, ScheduleBuilder& b) {
  const int n = a.nranks;
  StepId heard = kNoStep;
  std::uint32_t round = 0;
  for (long long d = 1; d < n; d <<= 1, ++round) {
    b.send(mod(a.rank + d, n), in_region(0, 0), round, Deps{heard});
    heard = b.recv(mod(a.rank - d, n), out_region(0, 0), round);
  }
}

}  // namespace comm::algo
