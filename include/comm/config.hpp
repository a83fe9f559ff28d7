#pragma once
/// \file config.hpp
/// One typed configuration for a communicator. Fill it by hand, or start from
/// Config::from_env() and overwrite fields: explicit assignments beat the
/// environment, and our COMM_* variables beat the launcher conventions.
///
/// Environment variables (read by from_env):
///   COMM_RANK, COMM_WORLD_SIZE, COMM_LOCAL_RANK   this rank, the group size, rank on this host
///     fallbacks, the launcher that started the process first: OMPI_COMM_WORLD_RANK/_SIZE/
///     _LOCAL_RANK (Open MPI), PMI_RANK/PMI_SIZE/MPI_LOCALRANKID and PMIX_RANK (MPICH, Intel
///     MPI, PMIx), RANK/WORLD_SIZE/LOCAL_RANK (torchrun), SLURM_PROCID/SLURM_NTASKS/
///     SLURM_LOCALID (Slurm, which mpirun inside an allocation leaves behind); per variable.
///     Ranks that disagree (two claim one rank, or different world sizes) fail at creation
///     with invalid_config naming them (checked by the TCP store).
///   COMM_STORE        "host:port" (TCP store; rank 0 hosts it), "file:/dir", or "mpi" (under
///                     mpirun: rank 0 hosts a TCP store whose address MPI broadcasts; the
///                     default of the mpi transport)
///                     fallback: MASTER_ADDR:MASTER_PORT (torchrun)
///   COMM_STORE_TOKEN  shared secret a client must prove to the TCP store
///   COMM_STORE_BIND   address the rank-0 TCP store listens on (default: the store host)
///   COMM_TRANSPORT    transport name: local, auto, ucx, ofi, gloo, mpi, nccl, or a registered one;
///                     unset: local when all ranks are threads of one process, else auto
///                     (per pair of ranks the best transport that reaches it: inside a host
///                     shm, else ucx, ofi, gloo; between hosts ucx, then ofi, then gloo)
///                     (auto's own settings: auto.intra / auto.inter, COMM_AUTO_INTRA / _INTER)
///   COMM_TIMEOUT      default per-operation timeout in seconds (fractional ok), default 300
///   COMM_LOG          warn (default), info, debug, trace, or off; per communicator (see log.hpp):
///                     info says which transport, hosts, links and tuning were chosen; debug
///                     adds each collective's algorithm choice, once per size bucket
///   COMM_LOG_SUBSYS   subsystems to log, comma-separated: init, bootstrap, transport, select,
///                     coll, diag, or all (default); a leading ^ logs all but those ("^coll")
///   COMM_LOG_FILE     file for log lines instead of stderr; %h = host name, %p = pid,
///                     %r = rank, %% = %, e.g. "comm-%h-%p.log" (set_log_sink() beats both)
///   COMM_ALGO         selection override, e.g. "allreduce=direct:0-64K,ring:64K-;alltoall=pairwise"
///   COMM_CHUNK        pipeline chunk size in bytes (K/M suffixes), default 1M
///   COMM_CALIBRATE    0 to skip measuring the links, compute and native collectives at
///                     creation (default 1: measured once per setup, then cached; see tuning)
///   COMM_TUNING_FILE  JSON tuning file: used if present, written after calibration
///                     (default: one per setup in $XDG_CACHE_HOME/comm or ~/.cache/comm)
///   COMM_DETERMINISTIC 1 to allow only algorithms whose reduction order is the rank order at
///                     every size (results bitwise identical whatever algorithm, size or
///                     transport ran them; comm-info lists them); default 0
///   COMM_CHECK        1 to check collective consistency across ranks before data moves
///   COMM_DEVICE       CUDA device ordinal (NCCL transport; default: local rank)
///   COMM_IFACE        host address transports bind to (default 127.0.0.1 on a single host)
///   COMM_FLIGHT_RECORDER  number of operations each rank remembers (default 256; rounded up to a power of two)
///   COMM_DUMP_DIR     where flight-recorder dumps go (comm-flight-<rank>.json; on timeout, failure
///                     and SIGUSR1); default: written to stderr only on SIGUSR1
///
/// Transport settings belong to their transport (its README lists them):
/// Config::transport_options["<transport>.<setting>"], else the variable
/// COMM_<TRANSPORT>_<SETTING> (e.g. "ofi.provider" / COMM_OFI_PROVIDER).
/// Unparseable values throw comm::Error(invalid_config) naming the variable.

#include <comm/export.hpp>

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <string_view>

namespace comm {

enum class LogLevel { off, warn, info, debug, trace };
COMM_API std::string_view to_string(LogLevel l) noexcept;
COMM_API LogLevel parse_log_level(std::string_view s);

struct COMM_API Config {
  int rank = 0;
  int world_size = 1;
  /// This rank's position on its host as the launcher gave it (LOCAL_RANK and
  /// alike), for the embedding program (e.g. to pick its GPU). The library
  /// does not read it: it derives each rank's host and local position from the
  /// peer table (comm/peers.hpp).
  int local_rank = 0;
  /// "" (in-process: the caller passes a Store or world_size is 1; the mpi
  /// transport: "mpi"), "host:port", "file:/dir", or "mpi".
  std::string store;
  std::string store_token;
  std::string store_bind;
  std::string transport;  ///< "" = chosen at creation (see COMM_TRANSPORT above)
  std::chrono::milliseconds timeout{300'000};
  LogLevel log_level = LogLevel::warn;
  std::string log_subsystems;  ///< COMM_LOG_SUBSYS syntax; "" = all
  std::string log_file;        ///< COMM_LOG_FILE pattern; "" = stderr
  std::string algo_override;
  std::size_t chunk_bytes = std::size_t{1} << 20;
  /// Measure link, compute and native-collective figures at creation unless a
  /// tuning file for this setup exists (then reuse it); false: tuning_file or
  /// the transports' nominal figures.
  bool calibrate = true;
  std::string tuning_file;
  /// Calibration caches what it measured only if other work kept at most this
  /// share of the host's CPUs busy meanwhile (COMM_CALIBRATION_BUSY_LIMIT,
  /// 0..1; 1: always). A busier host's figures serve this job only, so one
  /// job started during a build cannot mislead every later one.
  double calibration_busy_limit = 0.5;
  bool check = false;
  /// Only algorithms whose per-element reduction order is the rank order,
  /// independent of size, chunking and layout: the same inputs give bitwise
  /// identical outputs under every algorithm chosen, size bucket and
  /// transport. Naming another algorithm (per call or in COMM_ALGO) is an error.
  bool deterministic = false;
  int device = -1;
  std::string iface;
  std::size_t flight_recorder_size = 256;
  std::string dump_dir;
  /// Settings owned by transports, keyed "<transport>.<setting>" (e.g.
  /// "ofi.provider"); see transport_option().
  std::map<std::string, std::string> transport_options;

  /// A transport's setting: transport_options["<transport>.<setting>"] if
  /// present, else the environment variable COMM_<TRANSPORT>_<SETTING>
  /// (upper case), else "".
  std::string transport_option(std::string_view transport, std::string_view setting) const;
  /// The name of the environment variable transport_option() reads, for messages.
  static std::string transport_option_variable(std::string_view transport, std::string_view setting);

  /// Reads the variables listed above on top of the defaults.
  static Config from_env();
};

/// Parses "64K", "1M", "2G", "4096" into bytes; throws invalid_config naming `what`.
COMM_API std::size_t parse_bytes(std::string_view text, std::string_view what);

}  // namespace comm
