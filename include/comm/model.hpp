#pragma once
/// \file model.hpp
/// The cost model the selector uses, offered for planning without a running
/// communicator (e.g. "how long would an 8-rank all-reduce of 64 KiB take on
/// NVSwitch?"). It simulates each algorithm's real schedule on links with
/// latency alpha and bandwidth beta (one send and one receive port per rank,
/// and another pair for network links: a NIC works beside NVLink)
/// plus local reduction/copy time. Thread safe; pure computation.

#include <comm/export.hpp>
#include <comm/transport.hpp>
#include <comm/types.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace comm {

/// Local compute costs of a rank (host defaults; a GPU is far faster).
struct ComputeModel {
  double reduce_gbps = 8.0;        ///< output bytes per ns a reduce step produces
  double copy_gbps = 10.0;         ///< memcpy throughput
  double step_overhead_us = 0.05;  ///< fixed cost per step the executor posts
  /// Fixed cost of one collective call (selection, schedule set-up, the
  /// completion wait), paid once per operation: 0.3 us measured for the host
  /// executor over UCX shm on the development VM.
  double op_overhead_us = 0.3;
  /// Collectives whose data (count * element size) exceeds this many bytes
  /// stream from memory rather than cache and use the *_large rates and
  /// LinkInfo::beta_large_gbps; 0 means no such regime.
  std::size_t cache_bytes = 0;
  double reduce_large_gbps = 0.0;  ///< reduce rate above cache_bytes; 0 means reduce_gbps
  double copy_large_gbps = 0.0;    ///< copy rate above cache_bytes; 0 means copy_gbps
};

struct Prediction {
  std::string algorithm;
  double us = -1;  ///< negative: the algorithm cannot run on that many ranks
};

/// Predicted time of every algorithm of `c` for a message of `bytes` (as the
/// selector sizes it, see Communicator::algorithm_for) on `nranks` ranks, all
/// pairs joined by `link`, with pipeline chunks of `chunk_bytes`. Sorted
/// fastest first; ineligible algorithms last with us < 0.
COMM_API std::vector<Prediction> predict(Collective c, int nranks, std::size_t bytes, const LinkInfo& link,
                                         const ComputeModel& compute = {},
                                         std::size_t chunk_bytes = std::size_t{1} << 20);

/// A cluster of `hosts` identical hosts of `ranks_per_host` ranks each (ranks
/// numbered host by host): `intra` joins two ranks of one host, `inter` two
/// ranks of different hosts (e.g. NVSwitch inside, one NIC per GPU between).
struct HostFabric {
  int hosts = 1;
  int ranks_per_host = 1;
  LinkInfo intra;
  LinkInfo inter;
};

/// As above on a cluster of hosts: the hierarchical algorithms see the host
/// groups and every pair its link. Throws invalid_argument for hosts or
/// ranks_per_host below 1.
COMM_API std::vector<Prediction> predict(Collective c, const HostFabric& fabric, std::size_t bytes,
                                         const ComputeModel& compute = {},
                                         std::size_t chunk_bytes = std::size_t{1} << 20);

/// A named machine for planning: its hosts and links, what a collective pays
/// on it beyond the wire, what it stands for and where its figures come from.
struct FabricPreset {
  std::string name;
  std::string what;    ///< the hardware it stands for
  std::string source;  ///< where each figure comes from (published measurements)
  HostFabric fabric;
  ComputeModel compute;
};

/// The built-in presets: "h100-8" (one host of 8 H100 SXM on NVSwitch),
/// "h100-2x8" and "h100-8x8" (such hosts, one 400 Gb/s NDR InfiniBand NIC per
/// GPU between them); "h100-<H>x8" for any H from 1 to 1024.
COMM_API std::vector<std::string> fabric_preset_names();
/// The preset `name`; throws invalid_argument naming the valid ones.
COMM_API FabricPreset fabric_preset(std::string_view name);

}  // namespace comm
