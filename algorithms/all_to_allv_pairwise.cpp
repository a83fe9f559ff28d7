// Pairwise-exchange variable all-to-all: the schedule of all_to_all_pairwise
// with per-peer counts and displacements. Zero-element messages are still
// exchanged: a rank whose counts disagree with its peer's then gets a size
// mismatch error naming both sizes instead of waiting for a message that
// never comes.

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
  if (a.send_counts[r])
    b.copy(out_region(a.recv_displs[r], a.recv_counts[r]), in_region(a.send_displs[r], a.send_counts[r]));
  std::vector<StepId> got(nn, kNoStep);
  for (int s = 1; s < n; ++s) {
    const auto from = static_cast<std::size_t>(mod(a.rank - s, n));
    got[static_cast<std::size_t>(s)] =
        b.recv(static_cast<int>(from), out_region(a.recv_displs[from], a.recv_counts[from]), 0);
  }
  StepId prev_send = kNoStep;
  for (int s = 1; s < n; ++s) {
    const auto to = static_cast<std::size_t>(mod(a.rank + s, n));
    prev_send = b.send(static_cast<int>(to), in_region(a.send_displs[to], a.send_counts[to]), 0,
                       Deps{prev_send, got[static_cast<std::size_t>(s - 1)]});
  }
}

}  // namespace comm::algo
