#pragma once
// Start-up calibration (Config::calibrate / COMM_CALIBRATE=1): replaces the
// transports' nominal link figures and the default compute costs with
// measurements of this machine, so the selector's cost model predicts what
// will actually run.
//
// For each link kind present (self excluded) one pair of ranks — the first
// pair (a < b) joined by that kind — exchanges 8 B and 1 MiB messages over
// the communicator's transport (both ranks send and receive at once, as in a
// collective's step): alpha = time of an 8 B exchange, beta = (1 MiB - 8 B) /
// (time of a 1 MiB exchange - alpha), matching the cost model's message time
// alpha + bytes / beta (each time the lower quartile of the exchanges, robust
// to a busy machine). Kinds are measured one after the other so pairs do not
// disturb each other. Every rank also measures its host
// reduce (f32 sum) and memcpy throughput; the slowest rank's figures are kept,
// because the slowest rank finishes a collective last. All results travel
// through the store, so every rank ends with identical values (ranks must
// select identically). Costs about 30 ms with shared memory and 40 ms with
// TCP on the development VM, most of it the compute measurement.

#include "cost_model.hpp"

#include <comm/store.hpp>
#include <comm/transport.hpp>

#include <chrono>

namespace comm {

// Tag kind reserved for calibration (bits 46-47 == 3); collectives and
// point-to-point traffic use kinds 1 and 2, so nothing can match these.
inline constexpr std::uint64_t kCalibrationTag = std::uint64_t{3} << 46;

// Collective over all `size` ranks (each calls it once, in the same order
// relative to other store/transport use): measures and overwrites alpha/beta
// of every link in `links` (by kind) and `compute`. `links` must be the
// exchanged matrix, identical on all ranks. `store` must be private to this
// communicator. Drives `transport` itself (progress/wait); no other traffic
// may be in flight. Throws comm::Error(timeout) naming the peer if a
// measurement or store wait exceeds `timeout`, or the transport's error;
// throws unsupported (on every rank alike) for stream-ordered transports.
void calibrate_links(Transport& transport, Store& store, int rank, int size, LinkMatrix& links,
                     ComputeParams& compute, std::chrono::milliseconds timeout);

}  // namespace comm
