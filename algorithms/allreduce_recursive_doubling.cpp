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

namespace comm::algo {

void build_allreduce_recursive_doubling(const AlgoArgs& a, ScheduleBuilder& b) {
  if (build_trivial_reduction(a, b)) return;
  const std::size_t count = a.count;
  const int r = a.rank;
  const PowerOfTwoFold fold(r, a.nranks);
  const int rounds = fold.rounds;
  const std::uint32_t fold_tag = 0;
  const auto unfold_tag = static_cast<std::uint32_t>(rounds + 1);
  const Region out = out_region(0, count);
  if (fold.folded_out) return fold_out(b, r, count, fold_tag, unfold_tag);
  const bool absorbs = fold.absorbs;
  const int vr = fold.virtual_rank;
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
    const int peer = fold.real(pv);
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
