#pragma once
/// \file transport.hpp
/// The transport plugin interface. A transport is a point-to-point engine
/// between the ranks of one group: non-blocking tagged send/receive of byte
/// ranges, progress, a wait that does not burn a core, its capabilities, and
/// the link to each peer. Algorithms never see it; the executor drives it.
///
/// Threading: a Transport is driven by one thread at a time (the thread calling
/// into its Communicator), except interrupt(), which any thread may call.
///
/// Registering your own: comm::register_transport("mine", factory); then
/// Config::transport = "mine" (or COMM_TRANSPORT=mine) selects it.

#include <comm/buffer.hpp>
#include <comm/config.hpp>
#include <comm/direct.hpp>
#include <comm/error.hpp>
#include <comm/export.hpp>
#include <comm/peers.hpp>
#include <comm/schedule.hpp>
#include <comm/store.hpp>
#include <comm/types.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace comm {

/// Tags handed to transports use only the low kTagBits bits; the bits above
/// are free for a transport's own use (e.g. encoding the source rank).
inline constexpr int kTagBits = 48;

/// The link joining this rank to a peer, as the transport sees it.
/// alpha_us: per-message latency (half round trip) in microseconds;
/// beta_gbps: sustained one-way bandwidth in GB/s (1e9 bytes/s).
struct LinkInfo {
  LinkKind kind = LinkKind::tcp;
  double alpha_us = 10.0;
  double beta_gbps = 1.0;
  std::string detail;  ///< human-readable, e.g. "ucx sysv/memory + cma", "tcp;ofi_rxm lo"
  /// Messages larger than this many bytes take a rendezvous protocol (e.g. UCX
  /// above its RNDV_THRESH) and cost rndv_extra_us more; the default (the
  /// largest size_t) means every message is eager.
  std::size_t rndv_threshold_bytes = static_cast<std::size_t>(-1);
  double rndv_extra_us = 0.0;  ///< extra latency of a rendezvous message (its handshake)
  /// Bandwidth when the collective's data exceeds ComputeModel::cache_bytes
  /// (streams from memory, not cache); 0 means beta_gbps.
  double beta_large_gbps = 0.0;
  /// The receiving rank's CPU moves the data (shared memory: a copy out of a
  /// segment or a cross-memory read), so a transfer on this link and a
  /// reduce/copy step of the receiver do not overlap; false: a NIC or another
  /// agent moves it.
  bool receiver_copies = false;
  /// Measured transfer times, increasing in both: (bytes, microseconds a
  /// message of that size takes beyond alpha_us and, above
  /// rndv_threshold_bytes, rndv_extra_us). Start-up calibration fills it from
  /// its exchange ladder. Where present, a message up to the last point's
  /// size costs the linear interpolation between the points around it (from
  /// (0, 0) below the first) instead of bytes / beta_gbps, one past it the
  /// last point's time plus the rest at beta_gbps: a link whose cost per byte
  /// changes with the size (loopback TCP under Gloo in one calibration here:
  /// 0.29 us per KiB from 256 to 512 KiB, 0.85 from 512 KiB to 1 MiB) is not
  /// forced onto one line. Collectives whose data exceeds
  /// ComputeModel::cache_bytes use beta_large_gbps.
  std::vector<std::pair<std::size_t, double>> transfer_curve{};
};

/// What a transport can do. Queried, never probed by catching exceptions.
struct TransportCaps {
  bool host_memory = true;     ///< can send/receive host memory
  bool cuda_memory = false;    ///< can send/receive CUDA device memory
  bool stream_ordered = false; ///< runs work on CUDA streams (see stream_engine())
  bool can_block = true;       ///< wait() sleeps instead of spinning
  bool peer_failure_detection = true; ///< a dead peer fails pending ops before the timeout
};

/// Completion record of one isend/irecv. Owned by the caller; must stay alive
/// and at the same address until the operation completes, fails, or cancel()
/// returns. The transport writes `bytes`, `code`, `message` and then `state`.
struct Completion {
  enum State : std::uint8_t { pending = 0, done = 1, failed = 2 };
  std::atomic<std::uint8_t> state{pending};
  std::size_t bytes = 0;  ///< bytes actually received (recv) or sent (send)
  ErrorCode code = ErrorCode::internal;  ///< meaningful when failed
  std::string message;                   ///< meaningful when failed; names the peer
  /// Meaningful when failed: the rank whose death or failure made this
  /// operation fail, when the transport knows it is not the operation's own
  /// peer (a dead third rank); -1: the operation's peer, or unknown.
  int cause = -1;

  void reset() noexcept {
    state.store(pending, std::memory_order_relaxed);
    bytes = 0;
    cause = -1;
  }
  bool is_pending() const noexcept { return state.load(std::memory_order_acquire) == pending; }
  void complete(std::size_t n) noexcept {
    bytes = n;
    state.store(done, std::memory_order_release);
  }
  void fail(ErrorCode c, std::string msg, int cause_rank = -1) noexcept {
    code = c;
    message = std::move(msg);
    cause = cause_rank;
    state.store(failed, std::memory_order_release);
  }
};

/// Arguments of one collective for transports with native collectives.
/// Counts/displacements are in elements. For all_to_allv the four arrays have
/// size() entries each; otherwise they are null.
struct CollectiveArgs {
  Collective collective = Collective::allreduce;
  const void* send = nullptr;
  void* recv = nullptr;
  /// Elements: allreduce/broadcast/reduce/send/recv the buffer; reduce_scatter the
  /// output; allgather the input; all_to_all one block (in.count / size()).
  std::size_t count = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;            ///< broadcast/reduce root; send/recv peer
  const std::size_t* send_counts = nullptr;
  const std::size_t* send_displs = nullptr;
  const std::size_t* recv_counts = nullptr;
  const std::size_t* recv_displs = nullptr;
  MemoryKind memory = MemoryKind::host;
  void* stream = nullptr;  ///< cudaStream_t for stream-ordered transports
  std::chrono::milliseconds timeout{0};
  std::uint64_t sequence = 0;  ///< the communicator's operation number
};

/// Optional: a transport's own collectives, offered as algorithms ("native"...).
class COMM_API NativeCollectives {
 public:
  virtual ~NativeCollectives();
  /// Algorithm names offered for `c` (empty if none), e.g. {"native", "native_bcube"}.
  virtual std::vector<std::string> algorithms(Collective c) const = 0;
  /// True if `args` can run under `algorithm`; otherwise sets *why (dtype/op/memory not supported).
  virtual bool supports(const CollectiveArgs& args, std::string_view algorithm, std::string* why) const = 0;
  /// Predicted time in microseconds for the selector, or a negative number if
  /// the transport has no model (then the algorithm is chosen only when asked for).
  virtual double predict_us(Collective c, std::string_view algorithm, std::size_t bytes) const = 0;
  /// Runs the collective. Host transports return when it completed; stream-ordered ones
  /// when it is enqueued on args.stream. Throws comm::Error on failure.
  virtual void run(const CollectiveArgs& args, std::string_view algorithm) = 0;
};

/// Buffers of one schedule execution (element type/op are the call's).
struct ScheduleBuffers {
  const void* input = nullptr;
  void* output = nullptr;
  void* scratch = nullptr;  ///< at least schedule.scratch_count elements, same memory kind
};

/// Optional: stream-ordered execution of a whole schedule (NCCL: grouped
/// sends/recvs plus a reduction kernel on the caller's stream).
class COMM_API StreamEngine {
 public:
  virtual ~StreamEngine();
  /// Allocates scratch of `bytes` in the transport's memory (freed by release_scratch).
  virtual void* allocate_scratch(std::size_t bytes) = 0;
  virtual void release_scratch(void* p) noexcept = 0;
  /// Enqueues `schedule` on `stream`; never synchronises the host.
  virtual void enqueue(const Schedule& schedule, const ScheduleBuffers& buffers, DataType dtype,
                       ReduceOp op, int world_size, std::uint64_t sequence, void* stream) = 0;
};

/// One condition a direct-memory wait is for: `rank`'s flag (of the slot
/// waited on) has reached `value` (see comm/direct.hpp).
struct FlagWait {
  int rank = -1;
  std::uint64_t value = 0;
};

/// Shape of the windows a DirectMemory offers.
struct DirectMemoryInfo {
  MemoryKind memory = MemoryKind::host;  ///< where windows live (host: shared memory; cuda: device memory)
  std::size_t window_bytes = 0;          ///< bytes of one window slot, its flag word included
  unsigned slots = 2;                    ///< slots per window: call seq uses slot seq % slots
  /// Host memory: how long a waiter may spin on a flag before it yields (0 when the
  /// ranks outnumber the cores); an executor polling data of its own bounds its spin so.
  std::uint32_t spin_ns = 2000;
  /// For the cost model: microseconds until another rank sees a flag (a cache-line hand-off
  /// between cores for host memory); GB/s at which a rank reads another rank's window,
  /// copies within its own memory, and produces the result of a two-source reduction.
  double flag_latency_us = 0.1;
  double read_gbps = 12.0;
  double copy_gbps = 20.0;
  double reduce_gbps = 16.0;
  /// For the cost model of reads of peers' buffers (DirectMemory::peer_reads()): the fixed
  /// microseconds of one read (a system call, pinning the peer's pages) and its GB/s.
  double peer_read_us = 1.0;
  double peer_read_gbps = 8.0;
  /// Why peer_reads() is null (a static string, e.g. "shm.cma / COMM_SHM_CMA=0 forbids
  /// cross-memory reads"); "" when it is offered.
  const char* no_peer_reads = "";
};

/// Optional capability of a DirectMemory: copying straight out of another
/// rank's own buffers (not its windows), so an algorithm need not stage its
/// input in a window first. Host memory (transport `shm`): process_vm_readv
/// with the peer's pid, one system call per read. A device implementation
/// would map each peer's registered buffers once through CUDA IPC and copy
/// with loads; none exists yet.
///
/// Offered only when every rank may read every other rank's memory, and
/// decided alike on every rank (ranks must agree on eligibility). Same
/// threading as its DirectMemory.
class COMM_API PeerReads {
 public:
  virtual ~PeerReads();
  /// Copies `bytes` from address `remote` in `rank`'s process to `local` in this one;
  /// returns when done. Throws comm::Error naming `rank`: peer_failed if its process is
  /// gone, transport_failure if the memory cannot be read (unmapped, not permitted).
  virtual void read(int rank, const void* remote, void* local, std::size_t bytes) = 0;
};

/// Optional: peer memory. Every rank of the group has mapped every other
/// rank's windows, so collectives can run as direct-memory programs
/// (comm/direct.hpp) instead of messages. A host implementation (transport
/// `shm`) returns host addresses, and the core's CPU executor runs programs
/// over them, calling signal() and wait(); a device implementation (CUDA IPC)
/// returns device addresses and runs programs as kernels that set and poll the
/// same flag words, its signal()/wait() enqueueing the flag store and the
/// flag wait on `stream` (cuStreamWriteValue64 / cuStreamWaitValue64 >=).
///
/// Owned by its transport, valid as long as it. Threading: one thread at a
/// time drives it (the communicator's), except that the transport's
/// interrupt() may be called from any thread and wakes wait().
class COMM_API DirectMemory {
 public:
  virtual ~DirectMemory();
  virtual DirectMemoryInfo info() const noexcept = 0;
  /// Start of `rank`'s window slot `slot` as mapped in this process (its first
  /// kDirectFlagBytes are the slot's flag word). Other ranks' windows are for
  /// reading only; writing this rank's own is what publishing means.
  virtual std::byte* window(int rank, unsigned slot) const noexcept = 0;
  /// Stores `value` into this rank's flag of `slot` with release semantics and
  /// wakes any rank asleep waiting for it. Never blocks. Device memory: enqueued on `stream`.
  virtual void signal(unsigned slot, std::uint64_t value, void* stream) noexcept = 0;
  /// Returns once every flag in `waits` (of slot `slot`) has reached its value,
  /// with acquire semantics. Host memory: spins briefly, then yields, then
  /// sleeps; never past `deadline`. Throws comm::Error: peer_failed naming a
  /// rank that died or left while it was awaited (or that another rank saw
  /// die), timeout naming the ranks that had not arrived by `deadline`, aborted
  /// after Transport::interrupt(). Device memory: enqueued on `stream`, returns at once.
  virtual void wait(unsigned slot, std::span<const FlagWait> waits, std::chrono::steady_clock::time_point deadline,
                    void* stream) = 0;
  /// Reads of the peers' own buffers (see PeerReads), or nullptr when not offered
  /// (DirectMemoryInfo::no_peer_reads says why). Owned by this DirectMemory.
  virtual PeerReads* peer_reads() noexcept { return nullptr; }
};

class COMM_API Transport {
 public:
  virtual ~Transport();

  virtual std::string_view name() const noexcept = 0;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual TransportCaps caps() const noexcept = 0;
  /// The link to `peer` (peer == rank() gives the self link).
  virtual LinkInfo link(int peer) const = 0;

  /// Posts a send of `bytes` at `data` to `peer` with `tag` (< 2^kTagBits).
  /// Messages between one (sender, receiver, tag) triple match in posting order.
  /// May complete `c` before returning. Throws only for usage errors.
  /// Every host transport implements it; a stream-ordered one
  /// (caps().stream_ordered) need not: the core never calls it there, and the
  /// default throws ErrorCode::unsupported naming the transport.
  virtual void isend(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Completion& c);
  /// Posts a receive of at most `bytes` into `data`. A longer message fails `c`
  /// with ErrorCode::mismatch and a message giving both sizes. Default as isend.
  virtual void irecv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Completion& c);
  /// Drives communication. Returns true if any completion changed state.
  /// Must not block.
  virtual bool progress() = 0;
  /// Blocks until progress() may make headway, `deadline` passes, or
  /// interrupt() is called. May return early; never sleeps past `deadline`.
  virtual void wait(std::chrono::steady_clock::time_point deadline) = 0;
  /// Wakes a thread blocked in wait(). Safe from any thread and from signal-free contexts.
  virtual void interrupt() noexcept = 0;
  /// Withdraws a pending operation. When it returns the transport no longer
  /// touches the buffer or `c` (c is left failed or done).
  virtual void cancel(Completion& c) noexcept = 0;

  /// Optional capabilities: nullptr when not offered.
  virtual NativeCollectives* native() noexcept { return nullptr; }
  virtual StreamEngine* stream_engine() noexcept { return nullptr; }
  /// Peer memory shared by all ranks of the group (see DirectMemory).
  virtual DirectMemory* direct() noexcept { return nullptr; }
};

/// What a transport factory receives. `store` is private to this
/// communicator (keys are already prefixed), shared by its ranks.
struct TransportInit {
  int rank = 0;
  int size = 1;
  std::shared_ptr<Store> store;
  const Config* config = nullptr;
  /// Every rank's host, pid and local rank, exchanged before the transport is
  /// created. Transports read hosts from here and never compute host identity
  /// themselves. When null, create_transport() exchanges it through `store`.
  std::shared_ptr<const PeerTable> peers;
};

using TransportFactory = std::function<std::unique_ptr<Transport>(const TransportInit&)>;

/// Registers a transport under `name` (replacing one of the same name).
/// Names are lowercase letters, digits and '_'; another name throws invalid_argument.
COMM_API void register_transport(std::string name, TransportFactory factory);
/// Names of the transports available in this build (registered or loadable).
COMM_API std::vector<std::string> available_transports();
/// The same, as one line: "local, ucx, ofi" (for error messages).
COMM_API std::string available_transports_list();
/// Why `name` is unavailable ("" if it is available), e.g. "built without UCX".
COMM_API std::string transport_unavailable_reason(std::string_view name);
/// Creates the transport `name`; throws unknown_transport listing the available ones.
COMM_API std::unique_ptr<Transport> create_transport(std::string_view name, const TransportInit& init);

}  // namespace comm
