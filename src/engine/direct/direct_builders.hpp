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
