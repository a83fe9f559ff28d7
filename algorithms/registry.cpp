// The list of every algorithm of the library: its user-visible name, the
// collective it implements, its build function and a one-line summary.

#include "algorithms/builders.hpp"

#include <array>

namespace comm::algo {
namespace {

constexpr std::array kAlgorithms{
    Algorithm{"ring", Collective::allreduce, build_allreduce_ring,
              "ring reduce-scatter + ring all-gather, chunk-pipelined; bandwidth-optimal, 2(n-1) latencies"},
    Algorithm{"tree", Collective::allreduce, build_allreduce_tree,
              "pipelined reduce up a binary tree to rank 0 and broadcast down; 2 log2(n) latencies"},
    Algorithm{"direct", Collective::allreduce, build_allreduce_direct,
              "one shot: everyone sends everything to everyone and reduces locally; 1 latency"},
    Algorithm{"twoshot", Collective::allreduce, build_allreduce_twoshot,
              "direct reduce-scatter + direct all-gather; 2 latencies, ring bandwidth"},
    Algorithm{"recursive_doubling", Collective::allreduce, build_allreduce_recursive_doubling,
              "log2(n) whole-vector exchanges (any n: extra ranks fold in first); small messages"},
    Algorithm{"rabenseifner", Collective::allreduce, build_allreduce_rabenseifner,
              "recursive-halving reduce-scatter + recursive-doubling all-gather (any n: extra ranks fold in)"},
    Algorithm{"hierarchical", Collective::allreduce, build_allreduce_hierarchical,
              "leader per host: reduce up a host tree, leaders exchange directly, broadcast down; small messages"},
    Algorithm{"hierarchical_rail", Collective::allreduce, build_allreduce_hierarchical_rail,
              "host ring reduce-scatter, ring all-reduce per rail across hosts, host ring all-gather"},
    Algorithm{"ring", Collective::reduce_scatter, build_reduce_scatter_ring,
              "n-1 ring steps, chunk-pipelined; bandwidth-optimal"},
    Algorithm{"direct", Collective::reduce_scatter, build_reduce_scatter_direct,
              "every rank sends block j to rank j and folds in rank order; 1 latency"},
    Algorithm{"hierarchical", Collective::reduce_scatter, build_reduce_scatter_hierarchical,
              "blocks to their agent on each host, folded there, then agents to owners; each block crosses once"},
    Algorithm{"ring", Collective::allgather, build_allgather_ring,
              "n-1 ring steps, chunk-pipelined; bandwidth-optimal"},
    Algorithm{"direct", Collective::allgather, build_allgather_direct,
              "every rank sends its block to every rank; 1 latency"},
    Algorithm{"hierarchical", Collective::allgather, build_allgather_hierarchical,
              "each block to its agent on every other host, then agents share inside their host"},
    Algorithm{"tree", Collective::broadcast, build_broadcast_tree,
              "binomial tree, chunk-pipelined; log2(n) latencies"},
    Algorithm{"scatter_allgather", Collective::broadcast, build_broadcast_scatter_allgather,
              "root scatters n blocks, ring all-gather spreads them; large messages"},
    Algorithm{"hierarchical", Collective::broadcast, build_broadcast_hierarchical,
              "binomial tree over one agent per host, then a binomial tree inside each host; pipelined"},
    Algorithm{"tree", Collective::reduce, build_reduce_tree,
              "binomial tree, chunk-pipelined; log2(n) latencies"},
    Algorithm{"direct", Collective::reduce, build_reduce_direct,
              "everyone sends to the root, which folds in rank order; 1 latency"},
    Algorithm{"hierarchical", Collective::reduce, build_reduce_hierarchical,
              "binomial tree inside each host to an agent, then over the agents to the root; pipelined"},
    Algorithm{"pairwise", Collective::all_to_all, build_all_to_all_pairwise,
              "n-1 exchange steps, one peer at a time (no incast)"},
    Algorithm{"bruck", Collective::all_to_all, build_all_to_all_bruck,
              "ceil(log2 n) rounds of packed blocks; small blocks, many ranks"},
    Algorithm{"pairwise", Collective::all_to_allv, build_all_to_allv_pairwise,
              "n-1 exchange steps with per-peer counts"},
    Algorithm{"dissemination", Collective::barrier, build_barrier_dissemination,
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
