#pragma once
// The tuning file (Config::tuning_file / COMM_TUNING_FILE): measured link
// latency/bandwidth per link kind and the local compute costs, as JSON, so a
// calibration run once can be reused by later jobs on the same kind of machine.
//
//   {
//     "comm_tuning_version": 5,
//     "key": {"id": "3f1c...", "description": "host ...; transport ucx; 2 ranks; ..."},
//     "links": { "shm": {"alpha_us": 0.9, "beta_gbps": 7.2, "rndv_extra_us": 0, "beta_large_gbps": 4.1},
//                "tcp": {"alpha_us": 6.0, "beta_gbps": 5.5, "rndv_threshold_bytes": 16384,
//                        "rndv_extra_us": 8.9, "beta_large_gbps": 4.4, "receiver_copies": true,
//                        "transfer_us": [[8, 0], [65536, 11.5], [524288, 85.0], [1048576, 190.0]]} },
//     "compute": {"reduce_gbps": 6.1, "copy_gbps": 11.0, "step_overhead_us": 0.05, "op_overhead_us": 0.3,
//                 "cache_bytes": 4194304, "reduce_large_gbps": 3.2, "copy_large_gbps": 5.0},
//     "native": {"allreduce": {"native": [[8, 120.5], [4096, 180.2], [1048576, 1100.0]]}},
//     "measured": {"allreduce": {"ring": [[8, 1.1], [4096, 2.3], [65536, 14.0], [1048576, 160.0]]}}
//   }
//
// Version 2 added rndv_threshold_bytes (absent: no rendezvous step),
// rndv_extra_us, beta_large_gbps, receiver_copies (a boolean),
// op_overhead_us, cache_bytes and the
// *_large rates (see LinkInfo and ComputeModel); version 1 files still load,
// leaving those at their current values. Version 3 added "key" (what the
// figures were measured on, see tuning.hpp) and "native" (measured times of
// the transport's own collectives per collective and algorithm, as
// [bytes, microseconds] pairs; see NativeProfile). Version 4 added
// "measured": the times of comm's own algorithms at creation, in the same
// form (they scale the cost model's predictions: Selector::set_measured_profile).
// Version 5 added a link's "transfer_us" (LinkInfo::transfer_curve: sizes
// above 0 increasing, times not decreasing).
//
// Every key is optional except the version; unknown keys, wrong types and
// out-of-range numbers are errors (a typo must not silently fall back to the
// defaults). Read and written with the one JSON module (util/json.hpp).

#include "select/cost_model.hpp"
#include "select/native_profile.hpp"
#include "util/json.hpp"

#include <comm/store.hpp>

#include <chrono>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace comm {

inline constexpr int kTuningFileVersion = 5;

// What a tuning file holds besides links and compute (versions 3 and 4).
struct TuningExtras {
  std::string key_id;           ///< "" if the file has no key
  std::string key_description;  ///< human-readable: what the figures were measured on
  NativeProfile native;
  NativeProfile measured;       ///< comm's own algorithms
};

// Applies the tuning file at `path` to every link of `links` whose kind it
// lists and to `compute`. Returns false (changing nothing) if the file does not
// exist. Throws comm::Error(invalid_config) naming the file and the problem if
// it cannot be read or is malformed; nothing is changed then either.
// `extras` (optional) receives the key and the native timings.
bool load_tuning(const std::string& path, LinkMatrix& links, ComputeParams& compute, TuningExtras* extras = nullptr);

// Applies tuning-file JSON `text` (from `origin`, named in errors) like load_tuning.
void apply_tuning(const std::string& text, const std::string& origin, LinkMatrix& links, ComputeParams& compute,
                  TuningExtras* extras = nullptr);

// Collective form for communicator creation: rank 0 reads `path` and passes
// its text (or "missing", or why it could not be read) to every rank through
// `store` (private to the communicator), and every rank applies the same text,
// so all ranks end with identical links even if their filesystems differ.
// Returns false on every rank if the file does not exist; on a malformed or
// unreadable file every rank throws the same invalid_config error.
bool load_tuning_agreed(const std::string& path, Store& store, int rank, LinkMatrix& links, ComputeParams& compute,
                        std::chrono::milliseconds timeout, TuningExtras* extras = nullptr);

// Writes the figures of each link kind present in `links` (self excluded; the
// first pair of a kind is taken, calibrated matrices hold one value per kind)
// and `compute` to `path`, atomically (temporary file + rename). Throws
// comm::Error(invalid_config) naming the file if it cannot be written.
void save_tuning(const std::string& path, const LinkMatrix& links, const ComputeParams& compute,
                 const TuningExtras* extras = nullptr);

}  // namespace comm
