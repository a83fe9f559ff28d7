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
namespace {

// Segments are ranges [lo, hi) of p balanced blocks.
struct Range {
  std::size_t lo, hi;
};

Region elems(const Partition& part, Range g, BufferId buf) {
  const std::size_t off = part.offset(g.lo);
  return Region{buf, off, part.offset(g.hi) - off};
}

// What the reduce-scatter leaves for the all-gather to retrace.
struct Halvings {
  Range seg;                       // the segment this rank reduced
  std::vector<Range> given;        // per round, the half it gave away...
  std::vector<StepId> given_sent;  // ...and the send of that half
  StepId last = kNoStep;           // the last reduction (it wrote seg and read scratch)
};

// Recursive halving over the p virtual ranks. `last` is the fold's
// reduction, if any; `from_input`: this rank's data is still in the input.
Halvings reduce_scatter_halving(const PowerOfTwoFold& fold, const Partition& part, StepId last, bool from_input,
                                ScheduleBuilder& b) {
  const int p = fold.p;
  const int vr = fold.virtual_rank;
  Halvings h;
  h.seg = Range{0, static_cast<std::size_t>(p)};
  h.given.resize(static_cast<std::size_t>(fold.rounds));
  h.given_sent.assign(static_cast<std::size_t>(fold.rounds), kNoStep);
  for (int k = 0; k < fold.rounds; ++k) {
    const int d = p >> (k + 1);
    const int pv = vr ^ d;
    const int peer = fold.real(pv);
    const auto tag = static_cast<std::uint32_t>(1 + k);
    const std::size_t mid = (h.seg.lo + h.seg.hi) / 2;
    const bool lower = (vr & d) == 0;
    const Range keep = lower ? Range{h.seg.lo, mid} : Range{mid, h.seg.hi};
    const Range give = lower ? Range{mid, h.seg.hi} : Range{h.seg.lo, mid};
    const BufferId cur = from_input ? BufferId::input : BufferId::output;
    const auto kk = static_cast<std::size_t>(k);
    h.given[kk] = give;
    if (const Region g = elems(part, give, cur); g.count) h.given_sent[kk] = b.send(peer, g, tag, Deps{last});
    if (const Region mine = elems(part, keep, cur); mine.count) {
      const Region got = elems(part, keep, BufferId::scratch);
      const Region dst = elems(part, keep, BufferId::output);
      const StepId rcv = b.recv(peer, got, tag, Deps{last});
      last = pv < vr ? b.reduce(dst, got, mine, {rcv}) : b.reduce(dst, mine, got, {rcv});
    }
    from_input = false;
    h.seg = keep;
  }
  h.last = last;
  return h;
}

// Undoes the halvings, receiving at each distance exactly the half given away
// at that distance. Returns the steps after which the output is complete.
std::vector<StepId> allgather_doubling(const PowerOfTwoFold& fold, const Partition& part, Halvings h,
                                       ScheduleBuilder& b) {
  const int vr = fold.virtual_rank;
  std::vector<StepId> seg_ready{h.last};
  for (int k = fold.rounds - 1; k >= 0; --k) {
    const auto kk = static_cast<std::size_t>(k);
    const int peer = fold.real(vr ^ (fold.p >> (k + 1)));
    const auto tag = static_cast<std::uint32_t>(1 + fold.rounds + k);
    if (const Region mine = elems(part, h.seg, BufferId::output); mine.count) {
      Deps d;
      for (StepId s : seg_ready) d.add(s);
      b.send(peer, mine, tag, d);
    }
    // In place, the half we gave may still be read from the input by that send.
    if (const Region theirs = elems(part, h.given[kk], BufferId::output); theirs.count)
      seg_ready.push_back(b.recv(peer, theirs, tag, Deps{h.given_sent[kk]}));
    h.seg = Range{std::min(h.seg.lo, h.given[kk].lo), std::max(h.seg.hi, h.given[kk].hi)};
  }
  return seg_ready;
}

}  // namespace

void build_allreduce_rabenseifner(const AlgoArgs& a, ScheduleBuilder& b) {
  if (build_trivial_reduction(a, b)) return;
  const std::size_t count = a.count;
  const int r = a.rank;
  const PowerOfTwoFold fold(r, a.nranks);
  const std::uint32_t fold_tag = 0;
  const auto unfold_tag = static_cast<std::uint32_t>(2 * fold.rounds + 1);
  if (fold.folded_out) return fold_out(b, r, count, fold_tag, unfold_tag);
  const Partition part{count, static_cast<std::size_t>(fold.p)};
  // Received halves land at their own element positions in scratch: each
  // round's half lies inside the previous one, so a receive waits for the
  // reduction that read the previous half.
  b.need_scratch(count);
  bool from_input = true;
  StepId last = kNoStep;
  if (fold.absorbs) {
    const StepId got = b.recv(r - 1, scratch_region(0, count), fold_tag);
    last = b.reduce(out_region(0, count), scratch_region(0, count), in_region(0, count), {got});
    from_input = false;
  }
  const std::vector<StepId> seg_ready =
      allgather_doubling(fold, part, reduce_scatter_halving(fold, part, last, from_input, b), b);
  if (fold.absorbs) {
    Deps d;
    for (StepId s : seg_ready) d.add(s);
    b.send(r - 1, out_region(0, count), unfold_tag, d);
  }
}

}  // namespace comm::algo
