#pragma once
// The cost model: runs the schedules of all ranks of an algorithm on simulated
// links and predicts the completion time of the slowest rank.
//
// Model: each message costs alpha(link) + bytes / beta(link) (or the link's
// measured transfer curve at that size, link_transfer_us); a rank has one
// send port and one receive port per port class (network links, tcp and ib,
// have their own beside those of the links inside a host, as a NIC works
// beside NVLink), and a message occupies the sender's send
// port and the receiver's receive port for step_overhead_us + bytes/beta (so
// a rank that sends n-1 tiny messages pays per message, not once); reduce
// steps cost bytes / gamma, copies bytes / copy_gbps, both on the rank's
// compute unit. Sends are eager: a transfer starts when both ports are free.
// A message above the link's rendezvous threshold arrives rndv_extra_us
// later; data larger than compute.cache_bytes moves at the large-data rates;
// each operation adds compute.op_overhead_us once; on links whose receiver
// copies the data (shared memory) a transfer occupies the receiver's compute
// unit too.

#include "algorithms/algorithm.hpp"

#include <comm/model.hpp>
#include <comm/transport.hpp>

#include <vector>

namespace comm {

// Links between every pair of ranks; identical on all ranks.
struct LinkMatrix {
  int n = 0;
  std::vector<LinkInfo> links;  // n*n, row = from, column = to
  const LinkInfo& at(int from, int to) const { return links[static_cast<std::size_t>(from) * n + to]; }
};

// Local compute costs (public as comm::ComputeModel for planning tools).
using ComputeParams = ComputeModel;

// Microseconds a message of `bytes` spends on `link` beyond its latency and
// rendezvous handshake: the link's transfer_curve where it has one, else
// bytes / beta_gbps; `from_memory` (the collective's data exceeds the cache
// size): bytes / beta_large_gbps where the link has that rate.
double link_transfer_us(const LinkInfo& link, std::size_t bytes, bool from_memory);

// How many messages the busiest rank sends in `algorithm`'s schedules for
// `args` (args.rank ignored): how finely the algorithm cuts the data, which
// its predicted time alone does not show (Selector::moves_alike).
std::size_t busiest_sends(const algo::Algorithm& algorithm, const algo::AlgoArgs& args);

// The compute costs to start from before calibration or a tuning file: the
// host defaults, or for transports that move only device memory, device-side
// reductions and copies at HBM speed with about one kernel launch per step.
ComputeParams default_compute(const TransportCaps& caps);

// Predicted time in microseconds of `algorithm` for `args` (args.rank ignored).
double predict_us(const algo::Algorithm& algorithm, const algo::AlgoArgs& args,
                  const LinkMatrix& links, const ComputeParams& compute);

}  // namespace comm
