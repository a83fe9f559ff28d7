// Recursive-doubling all-reduce: log2(p) rounds in which partners at distance
// 1, 2, 4, ... exchange their whole current vector and both reduce it. Eligible
// for every n: with p the largest power of two <= n and m = n - p, ranks
// 0..2m-1 first fold in pairs (even rank 2i hands its input to 2i+1, which
// reduces it and later hands the result back), leaving p ranks. Latency
// optimal (log2 p rounds) but moves the whole vector every round: small
// messages only.
//
// Identical bits everywhere: partners always compute (lower rank's value)
// (op) (higher rank's value), so both sides of an exchange perform the very
// same operation on the very same operands.

#include "algorithms/builders.hpp"

#include <bit>

namespace comm::algo {

void build_allreduce_recursive_doubling(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0) return;
  const std::size_t count = a.count;
  if (a.nranks == 1) {
    b.copy(out_region(0, count), in_region(0, count));
    return;
  }
  const int r = a.rank;
  const int p = static_cast<int>(std::bit_floor(static_cast<unsigned>(a.nranks)));
  const int m = a.nranks - p;
  const int rounds = std::countr_zero(static_cast<unsigned>(p));
  const std::uint32_t fold_tag = 0;
  const auto unfold_tag = static_cast<std::uint32_t>(rounds + 1);
  const Region out = out_region(0, count);
  if (r < 2 * m && r % 2 == 0) {
    // Folded out: contribute the input, then receive the result. The receive
    // overwrites the output, which in place is the input being sent.
    const StepId sent = b.send(r + 1, in_region(0, count), fold_tag);
    b.recv(r + 1, out, unfold_tag, {sent});
    return;
  }
  const bool absorbs = r < 2 * m;
  const int vr = absorbs ? r / 2 : r - m;
  auto real = [m](int v) { return v < m ? 2 * v + 1 : v + m; };
  // Distinct scratch slots per round: every receive can be posted at once.
  b.need_scratch(static_cast<std::size_t>(rounds + 1) * count);
  Region cur = in_region(0, count);
  StepId cur_ready = kNoStep;
  if (absorbs) {
    const Region got = scratch_region(0, count);
    const StepId rcv = b.recv(r - 1, got, fold_tag);
    cur_ready = b.reduce(out, got, cur, {rcv});  // lower rank first
    cur = out;
  }
  for (int k = 0; k < rounds; ++k) {
    const int pv = vr ^ (1 << k);
    const int peer = real(pv);
    const auto tag = static_cast<std::uint32_t>(k + 1);
    const Region got = scratch_region(static_cast<std::size_t>(k + 1) * count, count);
    const StepId sent = b.send(peer, cur, tag, Deps{cur_ready});
    const StepId rcv = b.recv(peer, got, tag);
    // Writes the output, which the send just read (and which is the input in place).
    cur_ready = pv < vr ? b.reduce(out, got, cur, {sent, rcv}) : b.reduce(out, cur, got, {sent, rcv});
    cur = out;
  }
  if (absorbs) b.send(r - 1, out, unfold_tag, {cur_ready});
}

}  // namespace comm::algo
