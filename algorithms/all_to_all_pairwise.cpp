// Pairwise-exchange all-to-all: in step s (1..n-1) rank r sends to r+s and
// receives from r-s, one step after the other. Every step is a permutation,
// so no receiver is flooded by n-1 senders at once (incast); receives are
// posted up front since they cost no bandwidth. n-1 latencies deep.
//
// In place, the block received from rank j lands where the block for rank j
// lies, so it may be written only once that block is sent. The send to
// r-s is step n-s: when that comes before step s the receive goes straight
// into the output, posted once that send is done; otherwise it goes to a
// scratch slot and is copied into place after the send (floor(n/2) slots;
// the n/2 partner of an even n sends and receives in the same step, so it
// takes a slot too: waiting for a send before posting its matching receive
// would deadlock a rendezvous transport).

#include "algorithms/builders.hpp"

namespace comm::algo {

void build_all_to_all_pairwise(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0) return;
  const int n = a.nranks;
  const std::size_t count = a.count;
  auto block = [count](int j) { return static_cast<std::size_t>(j) * count; };
  b.copy(out_region(block(a.rank), count), in_region(block(a.rank), count));
  // Steps s whose peer r-s is sent to later (s <= n-s) receive into slot s-1 in place.
  auto via_scratch = [&](int s) { return a.in_place && s <= n - s; };
  std::vector<StepId> got(static_cast<std::size_t>(n), kNoStep);
  for (int s = 1; s < n; ++s) {
    if (a.in_place && !via_scratch(s)) continue;  // posted after its block is sent (below)
    const int from = mod(a.rank - s, n);
    const Region dst = via_scratch(s) ? scratch_region(block(s - 1), count) : out_region(block(from), count);
    got[static_cast<std::size_t>(s)] = b.recv(from, dst, 0);
  }
  std::vector<StepId> sent(static_cast<std::size_t>(n), kNoStep);  // [s]: the send of step s
  StepId prev_send = kNoStep;
  for (int s = 1; s < n; ++s) {
    const int to = mod(a.rank + s, n);
    prev_send = b.send(to, in_region(block(to), count), 0, Deps{prev_send, got[static_cast<std::size_t>(s - 1)]});
    sent[static_cast<std::size_t>(s)] = prev_send;
    // In place: block `to` is free now; the receive from `to` (step n-s) may land.
    const int later = n - s;
    if (!a.in_place || later <= s) continue;
    got[static_cast<std::size_t>(later)] = b.recv(to, out_region(block(to), count), 0, {prev_send});
  }
  if (!a.in_place) return;
  for (int s = 1; s < n && via_scratch(s); ++s) {
    const int from = mod(a.rank - s, n);
    b.copy(out_region(block(from), count), scratch_region(block(s - 1), count),
           {got[static_cast<std::size_t>(s)], sent[static_cast<std::size_t>(n - s)]});
  }
  b.need_scratch(block(n / 2));
}

}  // namespace comm::algo
