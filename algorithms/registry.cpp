// The list of every algorithm of the library: its user-visible name, the
// collective it implements, its build function and a one-line summary.

#include "algorithms/builders.hpp"

#include <array>

namespace comm::algo {
namespace {

constexpr std::array kAlgorithms{
    Algorithm{"ring", Collective::allreduce, build_allreduce_ring, nullptr,
              "ring reduce-scatter + ring all-gather, chunk-pipelined; bandwidth-optimal, 2(n-1) latencies"},
    Algorithm{"tree", Collective::allreduce, build_allreduce_tree, nullptr,
              "pipelined reduce up a binary tree to rank 0 and broadcast down; 2 log2(n) latencies"},
    Algorithm{"direct", Collective::allreduce, build_allreduce_direct, nullptr,
              "one shot: everyone sends everything to everyone and reduces locally; 1 latency"},
    Algorithm{"twoshot", Collective::allreduce, build_allreduce_twoshot, nullptr,
              "direct reduce-scatter + direct all-gather; 2 latencies, ring bandwidth"},
    Algorithm{"recursive_doubling", Collective::allreduce, build_allreduce_recursive_doubling, nullptr,
              "log2(n) whole-vector exchanges (any n: extra ranks fold in first); small messages"},
    Algorithm{"rabenseifner", Collective::allreduce, build_allreduce_rabenseifner, nullptr,
              "recursive-halving reduce-scatter + recursive-doubling all-gather (any n: extra ranks fold in)"},
    Algorithm{"ring", Collective::reduce_scatter, build_reduce_scatter_ring, nullptr,
              "n-1 ring steps, chunk-pipelined; bandwidth-optimal"},
    Algorithm{"direct", Collective::reduce_scatter, build_reduce_scatter_direct, nullptr,
              "every rank sends block j to rank j and folds in rank order; 1 latency"},
    Algorithm{"ring", Collective::allgather, build_allgather_ring, nullptr,
              "n-1 ring steps, chunk-pipelined; bandwidth-optimal"},
    Algorithm{"direct", Collective::allgather, build_allgather_direct, nullptr,
              "every rank sends its block to every rank; 1 latency"},
    Algorithm{"tree", Collective::broadcast, build_broadcast_tree, nullptr,
              "binomial tree, chunk-pipelined; log2(n) latencies"},
    Algorithm{"scatter_allgather", Collective::broadcast, build_broadcast_scatter_allgather, nullptr,
              "root scatters n blocks, ring all-gather spreads them; large messages"},
    Algorithm{"tree", Collective::reduce, build_reduce_tree, nullptr,
              "binomial tree, chunk-pipelined; log2(n) latencies"},
    Algorithm{"direct", Collective::reduce, build_reduce_direct, nullptr,
              "everyone sends to the root, which folds in rank order; 1 latency"},
    Algorithm{"pairwise", Collective::all_to_all, build_all_to_all_pairwise, nullptr,
              "n-1 exchange steps, one peer at a time (no incast)"},
    Algorithm{"bruck", Collective::all_to_all, build_all_to_all_bruck, nullptr,
              "ceil(log2 n) rounds of packed blocks; small blocks, many ranks"},
    Algorithm{"pairwise", Collective::all_to_allv, build_all_to_allv_pairwise, nullptr,
              "n-1 exchange steps with per-peer counts"},
    Algorithm{"dissemination", Collective::barrier, build_barrier_dissemination, nullptr,
              "ceil(log2 n) rounds of empty messages to r + 2^k"},
};

}  // namespace

std::span<const Algorithm> all_algorithms() { return kAlgorithms; }

const Algorithm* find_algorithm(Collective c, std::string_view name) {
  for (const Algorithm& a : kAlgorithms)
    if (a.collective == c && a.name == name) return &a;
  return nullptr;
}

}  // namespace comm::algo
