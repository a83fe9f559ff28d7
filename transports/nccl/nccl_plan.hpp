#pragma once
// The order in which the NCCL stream engine issues a schedule's steps. Pure
// C++ (no CUDA), so that it is tested on every machine against every
// algorithm of the library (tests/nccl/test_nccl_plan.cpp).
//
// Everything runs on one stream, so a receive posted too early blocks every
// later launch until its data arrives; if the matching send sits behind such a
// receive on its own rank, the ranks deadlock. So:
//  - steps are taken in the schedule's own order (algorithms emit them round
//    by round, as a blocking program would run them); sends join the open
//    NCCL group until a step needs the result of a message in it, which
//    closes the group;
//  - receives are deferred: posted when a step needs them, or when the group
//    closes, as many as the group has sends beyond its receives (in a round
//    of a symmetric algorithm a rank receives as much as it sends, so the
//    peers' matching sends are in their corresponding group);
//  - local steps (reductions, copies) that do not need the open group are
//    launched ahead of it.
// Sends and receives each keep schedule order, and NCCL matches messages
// between two ranks in posting order, so the k-th send meets the k-th
// receive. test_nccl_plan checks both properties for every algorithm by
// simulating all ranks under rendezvous semantics.

#include <comm/schedule.hpp>

#include <vector>

namespace comm::nccl {

// One launch unit: local steps to launch first, then one group of messages.
struct Wave {
  std::vector<StepId> local;
  std::vector<StepId> messages;
};

std::vector<Wave> plan_waves(const Schedule& s);

}  // namespace comm::nccl
