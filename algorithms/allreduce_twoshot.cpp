// Two-shot all-reduce = direct reduce-scatter + direct all-gather over
// balanced blocks. Two latencies deep like a 2-rank ring, but with the ring's
// bandwidth (each port carries 2(n-1)/n of the data): the choice for medium
// messages. Rank r alone reduces block r (in rank order) and hands it out,
// so all ranks hold identical bits.

#include "algorithms/builders.hpp"

namespace comm::algo {

void build_allreduce_twoshot(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0) return;
  const BlockLayout L = BlockLayout::balanced(a.count, a.nranks);
  const auto r = static_cast<std::size_t>(a.rank);
  const auto rs = direct_reduce_scatter(b, a.rank, a.nranks, L, 0);
  // In place, output block j is input block j, which we send to rank j:
  // receive the reduced block j only after that send completed.
  direct_allgather(b, a.rank, a.nranks, L, out_region(L.out_off[r], L.len[r]), rs.done, &rs.sent, 1);
}

}  // namespace comm::algo
