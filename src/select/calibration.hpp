#pragma once
// Start-up calibration (on by default; Config::calibrate, COMM_CALIBRATE=0
// turns it off): replaces the transports' nominal link figures and the
// default compute costs with measurements of this machine, so the selector's
// cost model predicts what will actually run. tuning.hpp decides when it runs
// and caches the result.
//
// For each link kind present (self excluded) one pair of ranks, the first
// pair (a < b) joined by that kind, exchanges messages of 8 B to 1 MiB over
// the communicator's transport (both ranks send and receive at once, as in a
// collective's step). The ladder of sizes is walked four times, a few
// exchanges per size each time, and each size's time is the median of its
// samples inside Tukey's fences, so a burst of load on a busy machine costs a
// few samples of every size instead of bending the fit. fit_link turns the
// medians into alpha + bytes / beta plus a rendezvous step (threshold and
// extra latency) where the times jump, and transfer_curve keeps each size's
// time beyond those (the cost model interpolates between them). 1 MiB
// exchanges spread over many MiB of buffers give the large-data bandwidth
// (beta_large_gbps) of network links (tcp, ib); shared-memory links, whose data
// a CPU copies, take beta times the host's from-memory / in-cache memcpy
// rate instead; compute.cache_bytes is set to where the development
// VM's collectives leave the cache (4 MiB). A 1 MiB exchange run alongside a 1 MiB reduce tells
// whether the receiver's CPU moves the data (receiver_copies). Kinds are
// measured one after the other so pairs do not disturb each other. With three
// or more ranks, every rank then exchanges with its ring neighbours at once:
// what a small message costs beyond the pair alone (ranks outnumbering cores
// take turns on a core) is added to alpha. Every rank also measures its host
// reduce (f32 sum) and memcpy throughput, in cache and streaming from memory
// (the *_large rates), all ranks at once; the slowest rank's figures are kept,
// because the slowest rank finishes a collective last. All results travel
// through the store, so every rank ends with identical values (ranks must
// select identically).

#include "engine/tags.hpp"
#include "select/cost_model.hpp"

#include <comm/store.hpp>
#include <comm/transport.hpp>

#include <chrono>
#include <cstddef>
#include <utility>
#include <vector>

namespace comm::calib {
class Scratch;  // select/calibration_measure.hpp
}  // namespace comm::calib

namespace comm {

// Calibration's own tag kind (engine/tags.hpp): nothing else can match it.
inline constexpr std::uint64_t kCalibrationTag = detail::tag_kind(detail::TagKind::calibration);

// Collective over all `size` ranks (each calls it once, in the same order
// relative to other store/transport use): measures and overwrites alpha/beta
// of every link in `links` (by kind) and `compute`. `links` must be the
// exchanged matrix, identical on all ranks. `store` must be private to this
// communicator. Drives `transport` itself (progress/wait); no other traffic
// may be in flight. Throws comm::Error(timeout) naming the peer if a
// measurement or store wait exceeds `timeout`, or the transport's error;
// throws unsupported (on every rank alike) for stream-ordered transports.
// One link's figures fitted to exchange times.
struct LinkFit {
  double alpha_us = 0;
  double beta_gbps = 0;
  std::size_t rndv_threshold_bytes = static_cast<std::size_t>(-1);  // none found: every message eager
  double rndv_extra_us = 0;
};

// Fits alpha + bytes / beta (+ rndv_extra_us above rndv_threshold_bytes) to
// (bytes, us) samples sorted by size (at least 3, distinct sizes) by least
// squares of the relative error, for every split of the sizes into an eager
// and a rendezvous group (the two largest always rendezvous if any are),
// keeping the split that fits best. A step under 0.5 us or 25 % of alpha, or
// one that does not halve the error of the no-step fit, is noise, not a
// protocol switch: no threshold then. The threshold is the largest size
// timed eager.
LinkFit fit_link(const std::vector<std::pair<std::size_t, double>>& samples);

// The link's transfer curve (LinkInfo::transfer_curve) from the same
// samples: each size's time beyond fit.alpha_us (and fit.rndv_extra_us above
// the threshold), made non-decreasing where noise inverts neighbours (pooled
// adjacent violators: the pair's mean, not the larger of the two) and never
// negative. The line fit averages over every size; the curve keeps where the
// cost per byte changes between them (loopback TCP bends past 512 KiB).
std::vector<std::pair<std::size_t, double>> transfer_curve(const std::vector<std::pair<std::size_t, double>>& samples,
                                                           const LinkFit& fit);

// `ranks_here`: the ranks on this rank's host, itself included (they share
// its memory bus and cache while the host's compute is measured). `scratch`:
// the memory it measures in (calibration_measure.hpp).
void calibrate_links(Transport& transport, Store& store, calib::Scratch& scratch, int rank, int size, int ranks_here,
                     LinkMatrix& links, ComputeParams& compute, std::chrono::milliseconds timeout);

}  // namespace comm
