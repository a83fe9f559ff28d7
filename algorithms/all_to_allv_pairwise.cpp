// Pairwise-exchange variable all-to-all: the schedule of all_to_all_pairwise
// with per-peer counts and displacements. Zero-element messages are still
// exchanged: a rank whose counts disagree with its peer's then gets a size
// mismatch error naming both sizes instead of waiting for a message that
// never comes.
//
// In place the blocks may sit anywhere in the one buffer, received blocks over
// blocks still to be sent, so every received block (and the rank's own) goes
// to scratch first and is copied into place once every send is done.

#include "algorithms/builders.hpp"

#include <string>

namespace comm::algo {

void build_all_to_allv_pairwise(const AlgoArgs& a, ScheduleBuilder& b) {
  const int n = a.nranks;
  const auto nn = static_cast<std::size_t>(n);
  if (a.send_counts.size() < nn || a.send_displs.size() < nn || a.recv_counts.size() < nn ||
      a.recv_displs.size() < nn)
    throw Error(ErrorCode::invalid_argument,
                "all_to_allv: the count and displacement arrays need " + std::to_string(n) +
                    " entries each (one per rank); pass one entry per rank of the communicator");
  const auto r = static_cast<std::size_t>(a.rank);
  if (a.send_counts[r] != a.recv_counts[r])
    throw Error(ErrorCode::invalid_argument,
                "all_to_allv: rank " + std::to_string(a.rank) + " sends " + std::to_string(a.send_counts[r]) +
                    " elements to itself but expects to receive " + std::to_string(a.recv_counts[r]) +
                    "; send_counts[rank] must equal recv_counts[rank]");
  // Where the block from rank j is received: its output range, or in place
  // scratch[staged[j], +recv_counts[j]).
  std::vector<std::size_t> staged(nn, 0);
  std::size_t scratch = 0;
  for (std::size_t j = 0; j < nn && a.in_place; ++j) {
    staged[j] = scratch;
    scratch += a.recv_counts[j];
  }
  auto landing = [&](std::size_t j) {
    return a.in_place ? scratch_region(staged[j], a.recv_counts[j]) : out_region(a.recv_displs[j], a.recv_counts[j]);
  };
  std::vector<StepId> got(nn, kNoStep);  // [j]: the step that fills landing(j)
  if (a.send_counts[r]) got[r] = b.copy(landing(r), in_region(a.send_displs[r], a.send_counts[r]));
  std::vector<StepId> by_step(nn, kNoStep);
  for (int s = 1; s < n; ++s) {
    const auto from = static_cast<std::size_t>(mod(a.rank - s, n));
    got[from] = b.recv(static_cast<int>(from), landing(from), 0);
    by_step[static_cast<std::size_t>(s)] = got[from];
  }
  StepId prev_send = kNoStep;
  for (int s = 1; s < n; ++s) {
    const auto to = static_cast<std::size_t>(mod(a.rank + s, n));
    prev_send = b.send(static_cast<int>(to), in_region(a.send_displs[to], a.send_counts[to]), 0,
                       Deps{prev_send, by_step[static_cast<std::size_t>(s - 1)]});
  }
  if (!a.in_place) return;
  // The sends form a chain: the last one done means every one is.
  for (std::size_t j = 0; j < nn; ++j)
    if (a.recv_counts[j])
      b.copy(out_region(a.recv_displs[j], a.recv_counts[j]), landing(j), Deps{got[j], prev_send});
  b.need_scratch(scratch);
}

}  // namespace comm::algo
