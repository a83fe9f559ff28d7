// Hierarchical all-reduce, split-rail variant (the bandwidth one, UCC's
// cl/hier "split rail"): a ring reduce-scatter inside each host leaves each
// rank the host's partial of its share; a ring all-reduce per rail across
// hosts (one rank per host) completes each share; a ring all-gather inside
// each host spreads the shares. Each rank sends 2(H-1)/H of its share across
// hosts, H hosts of L ranks: S (H-1)/(H L) bytes per rank-pair rail per
// direction and phase, against the flat ring's 2(n-1)/n S over the slowest
// links. Composed from the ring builders over host groups and rails.
//
// Shares: the data is cut into B balanced rail blocks, B = the largest host's
// rank count; on a host of L ranks, local rank i owns the contiguous rail
// blocks [i B / L, (i+1) B / L) (one each on even hosts; a rank of a smaller
// host owns several, and joins each of their rails). Every element is reduced
// at exactly one rank and copied from there, so all ranks hold identical bits.
//
// Tags: the rails' phase uses [0, T2) (its peers are on other hosts, and all
// hosts derive T2 from the same global sizes); the host's reduce-scatter and
// all-gather use [T2, T2 + T1) and [T2 + T1, T2 + 2 T1), T1 per host.

#include "algorithms/hierarchy.hpp"

#include <algorithm>

namespace comm::algo {
namespace {

struct Shares {
  Partition blocks;  // the B rail blocks of the buffer
  int B = 1;
  // First rail block of local rank i on a host of `size` ranks.
  std::size_t first(int i, int size) const {
    return static_cast<std::size_t>(i) * static_cast<std::size_t>(B) / static_cast<std::size_t>(size);
  }
  // Local index of the owner of rail block j on a host of `size` ranks.
  int owner(std::size_t j, int size) const {
    int i = 0;
    while (first(i + 1, size) <= j) ++i;
    return i;
  }
};

// Which step finished which output elements, so a later phase can wait for
// exactly the elements it reads: phases pipeline chunk by chunk even though
// their chunkings differ.
class Produced {
 public:
  void add(std::size_t lo, std::size_t len, StepId step) {
    if (len && step != kNoStep) spans_.push_back({lo, lo + len, step});
  }
  void add(const BlockLayout& L, std::size_t j, const Chunking& ch, const std::vector<StepId>& steps) {
    for (std::size_t c = 0; c < ch.chunks; ++c) add(L.out_off[j] + ch.begin(c), ch.len(L.len[j], c), steps[c]);
  }
  // One step after which [lo, lo + len) is final: the producing step, or a
  // zero-element copy waiting for every producer that overlaps it.
  StepId ready(ScheduleBuilder& b, std::size_t lo, std::size_t len) const {
    Deps d;
    StepId only = kNoStep;
    int n = 0;
    for (const Span& s : spans_)
      if (s.lo < lo + len && lo < s.hi) {
        d.add(s.step);
        only = s.step;
        ++n;
      }
    if (n <= 1) return only;
    return b.copy(out_region(lo, 0), out_region(lo, 0), d);
  }
  // ready() for chunk c of every block of L: the [block][chunk] table the ring builders take.
  std::vector<std::vector<StepId>> table(ScheduleBuilder& b, const BlockLayout& L, const Chunking& ch) const {
    std::vector<std::vector<StepId>> t(L.len.size(), std::vector<StepId>(ch.chunks, kNoStep));
    for (std::size_t j = 0; j < L.len.size(); ++j)
      for (std::size_t c = 0; c < ch.chunks; ++c)
        if (const std::size_t len = ch.len(L.len[j], c)) t[j][c] = ready(b, L.out_off[j] + ch.begin(c), len);
    return t;
  }

 private:
  struct Span {
    std::size_t lo, hi;
    StepId step;
  };
  std::vector<Span> spans_;
};

// This host's shares: position i owns rail blocks [first(i), first(i+1)).
BlockLayout host_shares(const Shares& sh, int L) {
  BlockLayout host;
  for (int i = 0; i < L; ++i) {
    const std::size_t lo = sh.first(i, L), hi = sh.first(i + 1, L);
    host.in_off.push_back(sh.blocks.offset(lo));
    host.out_off.push_back(sh.blocks.offset(lo));
    host.len.push_back(sh.blocks.offset(hi) - sh.blocks.offset(lo));
  }
  return host;
}

// Phase 2's layout: every rail block cut into H pieces, one chunking for all.
struct RailPhase {
  int H = 1;
  Chunking ch;
  std::size_t max_piece = 0;     // elements of the largest piece
  std::size_t rail_tags = 0;     // tags per rail block
  std::size_t scratch_base = 0;  // after phase 1's scratch
  std::size_t stride = 0;        // scratch per rail block
};

// Rail block j (the k-th of our share): a ring all-reduce with its owner on
// every host, each piece chunk starting as soon as phase 1 finished it;
// records in `done` which step finished which output elements.
void allreduce_rail_block(ScheduleBuilder& b, const AlgoArgs& a, const HostGroups& h, const Shares& sh,
                          const RailPhase& rp, std::size_t j, std::size_t k, const Produced& partial, Produced& done) {
  const int H = rp.H;
  std::vector<int> rail;
  for (int o = 0; o < H; ++o) rail.push_back(h.member(o, sh.owner(j, h.host_size(o))));
  BlockLayout pieces = BlockLayout::balanced(sh.blocks.size(j), H);
  for (auto& off : pieces.in_off) off += sh.blocks.offset(j);
  pieces.out_off = pieces.in_off;
  pieces.src = BufferId::output;  // the host partial phase 1 left there
  const RingView ring = RingView::of_order(rail, a.rank);
  const std::size_t base = rp.scratch_base + k * rp.stride;
  const auto ready = partial.table(b, pieces, rp.ch);
  const auto rs = ring_reduce_scatter(b, ring, pieces, rp.ch, 0, base, j * rp.rail_tags, &ready);
  b.need_scratch(base + rp.stride);
  RingAllgatherSpec spec;
  spec.shift = 1;
  spec.own_ready = &rs.owned_done;
  spec.write_guard = &rs.input_read;  // a piece is overwritten only after we sent our partial of it
  const auto got =
      ring_allgather(b, ring, pieces, rp.ch, spec, j * rp.rail_tags + static_cast<std::size_t>(H - 1) * rp.ch.chunks);
  // shift 0: position p ends owning piece p + 1; the others arrive.
  const auto own_piece = static_cast<std::size_t>(mod(ring.pos + 1LL, H));
  for (std::size_t q = 0; q < pieces.len.size(); ++q)
    done.add(pieces, q, rp.ch, q == own_piece ? rs.owned_done : got[q]);
}

}  // namespace

void build_allreduce_hierarchical_rail(const AlgoArgs& a, const HostPlace& at, ScheduleBuilder& b) {
  const HostGroups& h = at.hosts;
  const int me = at.local, H = at.num_hosts;
  const int L = static_cast<int>(at.members.size());
  const auto mine = static_cast<std::size_t>(me);
  const auto& members = at.members;
  Shares sh;
  for (int k = 0; k < H; ++k) sh.B = std::max(sh.B, h.host_size(k));
  sh.blocks = {a.count, static_cast<std::size_t>(sh.B)};

  const BlockLayout host = host_shares(sh, L);
  const Chunking ch1 = plan_chunks(host.max_len(), a.chunk_elems, 2 * static_cast<std::size_t>(L - 1));
  // The rails' pieces: each rail block split among H hosts; one chunking for all.
  RailPhase rp;
  rp.H = H;
  rp.max_piece = (sh.blocks.size(0) + static_cast<std::size_t>(H) - 1) / static_cast<std::size_t>(H);
  rp.ch = plan_chunks(rp.max_piece, a.chunk_elems, 2 * static_cast<std::size_t>(H - 1) * static_cast<std::size_t>(sh.B));
  rp.rail_tags = 2 * static_cast<std::size_t>(H - 1) * rp.ch.chunks;
  const std::size_t T2 = rp.rail_tags * static_cast<std::size_t>(sh.B);
  const std::size_t T1 = static_cast<std::size_t>(L - 1) * ch1.chunks;
  const RingView host_ring = RingView::of_order(members, a.rank);

  // 1. Host reduce-scatter: our share's host partial, in our output.
  RingReduceScatterResult rs1;
  Produced partial;
  if (L > 1) {
    rs1 = ring_reduce_scatter(b, host_ring, host, ch1, -1, 0, T2);
    b.need_scratch(ring_reduce_scatter_scratch(host, L));
    partial.add(host, mine, ch1, rs1.owned_done);
  } else {
    for (std::size_t c = 0; c < ch1.chunks; ++c) {
      const std::size_t at = host.in_off[0] + ch1.begin(c), len = ch1.len(host.len[0], c);
      partial.add(at, len, b.copy(out_region(at, len), in_region(at, len)));
    }
  }

  // 2. Per rail block of our share: ring all-reduce with its owner on every host.
  rp.scratch_base = L > 1 ? ring_reduce_scatter_scratch(host, L) : 0;
  rp.stride = static_cast<std::size_t>(H - 1) * rp.max_piece;
  Produced done = partial;
  if (H > 1) done = {};
  for (std::size_t j = sh.first(me, L), k = 0; H > 1 && j < sh.first(me + 1, L); ++j, ++k)
    allreduce_rail_block(b, a, h, sh, rp, j, k, partial, done);
  if (L == 1) return;

  // 3. Host all-gather of the finished shares, chunk by chunk. In place,
  // another share's output range is its input range, which phase 1 read first.
  std::vector<StepId> ready(ch1.chunks, kNoStep);
  for (std::size_t c = 0; c < ch1.chunks; ++c)
    if (const std::size_t len = ch1.len(host.len[mine], c)) ready[c] = done.ready(b, host.out_off[mine] + ch1.begin(c), len);
  RingAllgatherSpec spec;
  spec.own_ready = &ready;
  spec.write_guard = &rs1.input_read;
  ring_allgather(b, host_ring, host, ch1, spec, T2 + T1);
}

}  // namespace comm::algo
