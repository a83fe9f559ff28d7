#pragma once
// The cost model of direct-memory algorithms: builds every rank's program
// (the very programs the executor runs) and simulates them together.
//
// Model: each rank runs its program in order on one core. A copy costs
// step_us + bytes / rate, where rate is the memory's copy rate for local
// sources and its peer read rate for another rank's window; a reduction of k
// sources costs step_us + max((k-1) bytes / reduce rate, remote bytes / peer
// read rate). A copy out of a peer's own buffer (a system call on host memory)
// costs step_us + peer_read_us + bytes / peer_read_gbps. The rates are the memory's (DirectMemoryInfo: the executor
// copies with memcpy, with no per-message work). Above compute.cache_bytes the
// compute model's large-data rates apply instead, shared by the ranks that
// stream at once (memory bandwidth is one resource). A signal
// costs step_us; a wait ends flag_latency_us after the awaited signal (one
// cache-line hand-off). The call costs op_overhead_us more (API, plan lookup).

#include "engine/direct/direct_algorithm.hpp"
#include "select/cost_model.hpp"

#include <comm/transport.hpp>

namespace comm {

struct DirectCosts {
  double flag_latency_us = 0.1;
  double read_gbps = 12.0;
  double copy_gbps = 20.0;
  double reduce_gbps = 16.0;
  double peer_read_us = 1.0;  // a read of a peer's own buffer (DirectMemory::peer_reads): fixed cost
  double peer_read_gbps = 8.0;
  double step_us = 0.01;
  double op_overhead_us = 0.1;
};

DirectCosts direct_costs(const DirectMemoryInfo& info);

// Predicted time in microseconds of `algorithm` for `args` (args.rank ignored);
// negative when it is not eligible.
double predict_direct_us(const direct::DirectAlgorithm& algorithm, const direct::DirectArgs& args,
                         const DirectCosts& costs, const ComputeParams& compute);

}  // namespace comm
