// Every direct-memory algorithm: its user-visible name, its collective, its
// build and eligibility functions and a one-line summary. The names share each
// collective's namespace with the schedule algorithms, hence the mem_ prefix.

#include "engine/direct/direct_builders.hpp"

#include <array>

namespace comm::direct {
namespace {

constexpr std::array kDirect{
    DirectAlgorithm{"mem_oneshot", Collective::allreduce, build_allreduce_oneshot, eligible_allreduce_oneshot,
                    "peer memory: publish, one flag, every rank reduces all windows; fits one window"},
    DirectAlgorithm{"mem_twoshot", Collective::allreduce, build_allreduce_twoshot, eligible_allreduce_twoshot,
                    "peer memory: each rank reduces its 1/n block of all windows, then gathers; chunk-pipelined"},
    DirectAlgorithm{"mem_peer_oneshot", Collective::allreduce, build_allreduce_peer_oneshot,
                    eligible_allreduce_peer_oneshot,
                    "peer memory: every rank copies every peer's own input (one read each), then folds all; "
                    "fits a window / (n-1); needs peer reads (shm: cross-memory reads)",
                    true},
    DirectAlgorithm{"mem_peer_twoshot", Collective::allreduce, build_allreduce_peer_twoshot,
                    eligible_allreduce_peer_twoshot,
                    "peer memory: two-shot reading the peers' own buffers (one copy per shot, no staging); "
                    "needs peer reads (shm: cross-memory reads)",
                    true},
    DirectAlgorithm{"mem_direct", Collective::reduce_scatter, build_reduce_scatter_direct,
                    eligible_reduce_scatter_direct, "peer memory: rank r folds block r of every window"},
    DirectAlgorithm{"mem_peer", Collective::reduce_scatter, build_reduce_scatter_peer, eligible_reduce_scatter_peer,
                    "peer memory: rank r copies block r of every peer's own input (one read each), then folds; "
                    "needs peer reads (shm: cross-memory reads)",
                    true},
    DirectAlgorithm{"mem_direct", Collective::allgather, build_allgather_direct, eligible_allgather_direct,
                    "peer memory: every rank copies every window"},
    DirectAlgorithm{"mem_direct", Collective::broadcast, build_broadcast_direct, eligible_broadcast_direct,
                    "peer memory: everyone copies the root's window, chunk by chunk"},
    DirectAlgorithm{"mem_direct", Collective::reduce, build_reduce_direct, eligible_reduce_direct,
                    "peer memory: the root folds every window"},
    DirectAlgorithm{"mem_direct", Collective::all_to_all, build_all_to_all_direct, eligible_all_to_all_direct,
                    "peer memory: every rank copies its block out of every window"},
    DirectAlgorithm{"mem_direct", Collective::barrier, build_barrier_direct, nullptr,
                    "peer memory: one flag per rank"},
};

}  // namespace

std::span<const DirectAlgorithm> all_direct_algorithms() { return kDirect; }

const DirectAlgorithm* find_direct_algorithm(Collective c, std::string_view name) {
  for (const DirectAlgorithm& a : kDirect)
    if (a.collective == c && a.name == name) return &a;
  return nullptr;
}

}  // namespace comm::direct
