// Bruck all-to-all: ceil(log2 n) rounds instead of n-1. Blocks are first
// rotated so that slot i holds the block for rank r+i; in round k every slot
// whose index has bit k set travels 2^k ranks onward (packed into one
// message); finally slot i holds the block from rank r-i. Each block crosses
// up to log2(n) links, so it pays only when latency dominates: small blocks,
// many ranks.

#include "algorithms/builders.hpp"

namespace comm::algo {

void build_all_to_all_bruck(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0) return;
  const int n = a.nranks;
  const auto nn = static_cast<std::size_t>(n);
  const std::size_t count = a.count;
  const auto r = static_cast<std::size_t>(a.rank);
  if (n == 1) {
    b.copy(out_region(0, count), in_region(0, count));
    return;
  }
  // Scratch: the n rotated slots, then per round a pack and an unpack area.
  auto slot = [count](std::size_t i, std::size_t k = 1) { return scratch_region(i * count, k * count); };
  std::vector<StepId> written(nn, kNoStep);  // the last step that wrote slot i
  const StepId head = b.copy(slot(0, nn - r), in_region(r * count, (nn - r) * count));
  for (std::size_t i = 0; i < nn - r; ++i) written[i] = head;
  StepId tail = kNoStep;
  if (r > 0) {
    tail = b.copy(slot(nn - r, r), in_region(0, r * count));
    for (std::size_t i = nn - r; i < nn; ++i) written[i] = tail;
  }
  std::size_t area = nn * count;
  std::uint32_t round = 0;
  for (std::size_t d = 1; d < nn; d <<= 1, ++round) {
    // Slots with bit `round` set come in runs [start, start + d).
    struct Run {
      std::size_t start, blocks, packed_at;
      StepId pack;
    };
    std::vector<Run> runs;
    std::size_t packed = 0;
    for (std::size_t start = d; start < nn; start += 2 * d) {
      const std::size_t blocks = std::min(d, nn - start);
      runs.push_back({start, blocks, packed, kNoStep});
      packed += blocks;
    }
    const Region pack_area = scratch_region(area, packed * count);
    const Region recv_area = scratch_region(area + packed * count, packed * count);
    area += 2 * packed * count;
    Deps all_packed;
    for (Run& run : runs) {
      Deps d_in;
      for (std::size_t i = run.start; i < run.start + run.blocks; ++i) d_in.add(written[i]);
      run.pack = b.copy(sub(pack_area, run.packed_at * count, run.blocks * count), slot(run.start, run.blocks), d_in);
      all_packed.add(run.pack);
    }
    b.send(mod(a.rank + static_cast<long long>(d), n), pack_area, round, all_packed);
    const StepId got = b.recv(mod(a.rank - static_cast<long long>(d), n), recv_area, round);
    for (const Run& run : runs) {
      const StepId unpack = b.copy(slot(run.start, run.blocks),
                                   sub(recv_area, run.packed_at * count, run.blocks * count), {got, run.pack});
      for (std::size_t i = run.start; i < run.start + run.blocks; ++i) written[i] = unpack;
    }
  }
  for (std::size_t i = 0; i < nn; ++i) {
    const auto from = static_cast<std::size_t>(mod(a.rank - static_cast<long long>(i), n));
    // After both rotations have read the input: in place, the output is the input.
    b.copy(out_region(from * count, count), slot(i), Deps{written[i], head, tail});
  }
  b.need_scratch(area);
}

}  // namespace comm::algo
