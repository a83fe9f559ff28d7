#pragma once
// Build and eligibility functions of every direct-memory algorithm, one file
// each (allreduce_oneshot.cpp, ...); registry.cpp lists them by name.

#include "engine/direct/direct_algorithm.hpp"

#include <vector>

namespace comm::direct {

void build_allreduce_oneshot(const DirectArgs& a, ProgramBuilder& b);
bool eligible_allreduce_oneshot(const DirectArgs& a);
void build_allreduce_twoshot(const DirectArgs& a, ProgramBuilder& b);
bool eligible_allreduce_twoshot(const DirectArgs& a);
void build_allreduce_peer_twoshot(const DirectArgs& a, ProgramBuilder& b);
bool eligible_allreduce_peer_twoshot(const DirectArgs& a);
void build_allreduce_peer_oneshot(const DirectArgs& a, ProgramBuilder& b);
bool eligible_allreduce_peer_oneshot(const DirectArgs& a);
// mem_peer_oneshot's program for `bytes` at `from` of every input (the whole
// input for all-reduce, block r for reduce-scatter), and whether its scratch fits.
void build_peer_fold(const DirectArgs& a, ProgramBuilder& b, std::size_t from, std::size_t bytes);
bool peer_fold_fits(const DirectArgs& a, std::size_t bytes);
void build_reduce_scatter_peer(const DirectArgs& a, ProgramBuilder& b);
bool eligible_reduce_scatter_peer(const DirectArgs& a);
void build_reduce_scatter_direct(const DirectArgs& a, ProgramBuilder& b);
bool eligible_reduce_scatter_direct(const DirectArgs& a);
void build_allgather_direct(const DirectArgs& a, ProgramBuilder& b);
bool eligible_allgather_direct(const DirectArgs& a);
void build_broadcast_direct(const DirectArgs& a, ProgramBuilder& b);
bool eligible_broadcast_direct(const DirectArgs& a);
void build_reduce_direct(const DirectArgs& a, ProgramBuilder& b);
bool eligible_reduce_direct(const DirectArgs& a);
void build_all_to_all_direct(const DirectArgs& a, ProgramBuilder& b);
bool eligible_all_to_all_direct(const DirectArgs& a);
void build_barrier_direct(const DirectArgs& a, ProgramBuilder& b);

}  // namespace comm::direct
