// Rabenseifner all-reduce: recursive-halving reduce-scatter (log2 p rounds;
// partners at distance p/2, p/4, ..., 1 swap halves of their current segment
// and each reduces the half it keeps) followed by a recursive-doubling
// all-gather that retraces the halvings. 2 log2(p) latencies with the ring's
// bandwidth (2(p-1)/p of the data per port): large messages on many ranks.
// Any n: ranks 0..2m-1 (m = n - p) fold in pairs first, as in
// recursive_doubling.
//
// Identical bits everywhere: each half is reduced by the one rank that keeps
// it, always as (lower rank's value) (op) (higher rank's value), and the
// all-gather only copies.

#include "algorithms/builders.hpp"

namespace comm::algo {

void build_allreduce_rabenseifner(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0) return;
  const std::size_t count = a.count;
  if (a.nranks == 1) {
    b.copy(out_region(0, count), in_region(0, count));
    return;
  }
  const int r = a.rank;
  const PowerOfTwoFold fold(r, a.nranks);
  const int p = fold.p;
  const int rounds = fold.rounds;
  const std::uint32_t fold_tag = 0;
  const auto unfold_tag = static_cast<std::uint32_t>(2 * rounds + 1);
  if (fold.folded_out) return fold_out(b, r, count, fold_tag, unfold_tag);
  const bool absorbs = fold.absorbs;
  const int vr = fold.virtual_rank;
  // Segments are ranges [lo, hi) of p balanced blocks.
  const Partition part{count, static_cast<std::size_t>(p)};
  struct Range {
    std::size_t lo, hi;
  };
  auto elems = [&part](Range g, BufferId buf) {
    const std::size_t off = part.offset(g.lo);
    return Region{buf, off, part.offset(g.hi) - off};
  };
  // Received halves land at their own element positions in scratch: each
  // round's half lies inside the previous one, so a receive waits for the
  // reduction that read the previous half.
  b.need_scratch(count);
  bool from_input = true;
  StepId last = kNoStep;  // the last reduction (it wrote our segment and read scratch)
  if (absorbs) {
    const StepId got = b.recv(r - 1, scratch_region(0, count), fold_tag);
    last = b.reduce(out_region(0, count), scratch_region(0, count), in_region(0, count), {got});
    from_input = false;
  }
  Range seg{0, static_cast<std::size_t>(p)};
  std::vector<Range> given(static_cast<std::size_t>(rounds));
  std::vector<StepId> given_sent(static_cast<std::size_t>(rounds), kNoStep);
  for (int k = 0; k < rounds; ++k) {
    const int d = p >> (k + 1);
    const int pv = vr ^ d;
    const int peer = fold.real(pv);
    const auto tag = static_cast<std::uint32_t>(1 + k);
    const std::size_t mid = (seg.lo + seg.hi) / 2;
    const bool lower = (vr & d) == 0;
    const Range keep = lower ? Range{seg.lo, mid} : Range{mid, seg.hi};
    const Range give = lower ? Range{mid, seg.hi} : Range{seg.lo, mid};
    const BufferId cur = from_input ? BufferId::input : BufferId::output;
    const auto kk = static_cast<std::size_t>(k);
    given[kk] = give;
    if (const Region g = elems(give, cur); g.count) given_sent[kk] = b.send(peer, g, tag, Deps{last});
    if (const Region mine = elems(keep, cur); mine.count) {
      const Region got = elems(keep, BufferId::scratch);
      const Region dst = elems(keep, BufferId::output);
      const StepId rcv = b.recv(peer, got, tag, Deps{last});
      last = pv < vr ? b.reduce(dst, got, mine, {rcv}) : b.reduce(dst, mine, got, {rcv});
    }
    from_input = false;
    seg = keep;
  }
  // All-gather: undo the halvings, receiving at each distance exactly the
  // half we gave away at that distance.
  std::vector<StepId> seg_ready{last};
  for (int k = rounds - 1; k >= 0; --k) {
    const auto kk = static_cast<std::size_t>(k);
    const int peer = fold.real(vr ^ (p >> (k + 1)));
    const auto tag = static_cast<std::uint32_t>(1 + rounds + k);
    if (const Region mine = elems(seg, BufferId::output); mine.count) {
      Deps d;
      for (StepId s : seg_ready) d.add(s);
      b.send(peer, mine, tag, d);
    }
    // In place, the half we gave may still be read from the input by that send.
    if (const Region theirs = elems(given[kk], BufferId::output); theirs.count)
      seg_ready.push_back(b.recv(peer, theirs, tag, Deps{given_sent[kk]}));
    seg = Range{std::min(seg.lo, given[kk].lo), std::max(seg.hi, given[kk].hi)};
  }
  if (absorbs) {
    Deps d;
    for (StepId s : seg_ready) d.add(s);
    b.send(r - 1, out_region(0, count), unfold_tag, d);
  }
}

}  // namespace comm::algo
