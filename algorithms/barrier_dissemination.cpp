// Dissemination barrier: in round k every rank sends an empty message to
// r + 2^k and waits for one from r - 2^k. A round's send depends on every
// earlier round's receive, not only the last one: the message a rank sends in
// round k must carry everything it has heard so far, or with n >= 6 a rank
// hears, even indirectly, from only some of the others (after round k the
// ranks r - 2^(k+1) + 1 .. r must all be known to r). After ceil(log2 n)
// rounds every rank has heard, transitively, from every other.

#include "algorithms/builders.hpp"

namespace comm::algo {

void build_barrier_dissemination(const AlgoArgs& a, ScheduleBuilder& b) {
  const int n = a.nranks;
  Deps heard;  // every receive so far
  std::uint32_t round = 0;
  for (long long d = 1; d < n; d <<= 1, ++round) {
    b.send(mod(a.rank + d, n), in_region(0, 0), round, heard);
    heard.add(b.recv(mod(a.rank - d, n), out_region(0, 0), round));
  }
}

}  // namespace comm::algo
