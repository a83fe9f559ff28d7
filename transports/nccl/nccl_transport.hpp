#pragma once
// The NCCL transport, built as the plugin module libcomm_nccl.so so that the
// core library never depends on libnccl or libcudart. The core dlopen()s it
// when "nccl" is requested; comm_plugin_register() registers the factory.
//
// Everything is stream ordered: work is enqueued on the caller's CUDA stream
// and the host is never synchronised, so every call can be captured in a CUDA
// graph. Buffers must be CUDA device memory (MemoryKind::cuda).
//
// Failure: the NCCL communicator is created non-blocking (config.blocking = 0),
// so init, enqueue and abort never hang; a watchdog thread follows the work
// enqueued on each stream with a CUDA event and aborts the communicator
// (ncclCommAbort) when work outlives its timeout or NCCL reports an
// asynchronous error. A host thread blocked in cudaStreamSynchronize is then
// released, and every later call throws comm::Error quoting the first error.

#include <comm/transport.hpp>

#include "core/transport_base.hpp"
#include "util/interruptible_wait.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace comm::nccl {

using Clock = std::chrono::steady_clock;

// Throws comm::Error(transport_failure) naming `what` if `e` is not cudaSuccess.
void check_cuda(cudaError_t e, std::string_view what);

// While alive, lets this thread make CUDA calls that a stream capture in
// global mode would otherwise forbid (cudaMalloc, cudaEventQuery). Used only
// for calls that do not touch a captured stream.
class RelaxedCapture {
 public:
  RelaxedCapture() noexcept { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// The NCCL element type of `t` (every DataType has one).
ncclDataType_t to_nccl(DataType t) noexcept;

// Identity of one rank's GPU, exchanged through the store at creation.
struct PeerIdentity {
  std::string host;    // PeerInfo::host: equal means same machine
  std::string bus_id;  // PCI bus id of the rank's GPU, e.g. "0000:3B:00.0"
};

// Default alpha/beta of a link kind (transports/nccl/README.md gives sources).
LinkInfo default_link(LinkKind kind);
// This rank's links to every rank (index = peer), from CUDA peer access,
// NVML when libnvidia-ml.so.1 can be loaded, host identity and NCCL_NET.
std::vector<LinkInfo> detect_links(int rank, const std::vector<PeerIdentity>& peers);
// Text form of a row of links for the store, and back (exact round trip).
std::string encode_links(const std::vector<LinkInfo>& row);
std::vector<LinkInfo> decode_links(const std::string& text, int expected);

class NcclTransport;

// NCCL's own collectives, offered as the algorithm "native".
class NcclNative final : public NativeCollectivesOf<NcclTransport> {
 public:
  using NativeCollectivesOf::NativeCollectivesOf;
  COMM_NATIVE_COLLECTIVES_OVERRIDES;
};

#if COMM_NCCL_HAVE_KERNELS
// Runs our schedules on the caller's stream: waves of grouped ncclSend/ncclRecv
// (nccl_plan.hpp: which messages share a group, and why that cannot deadlock),
// our reduction kernel and cudaMemcpyAsync for local steps.
class NcclStreamEngine final : public StreamEngine {
 public:
  explicit NcclStreamEngine(NcclTransport& t) : t_(t) {}
  void* allocate_scratch(std::size_t bytes) override;
  void release_scratch(void* p) noexcept override;
  void enqueue(const Schedule& schedule, const ScheduleBuffers& buffers, DataType dtype, ReduceOp op,
               int world_size, std::uint64_t sequence, void* stream) override;

 private:
  NcclTransport& t_;
};
#endif

class NcclTransport final : public NativeTransportBase<NcclTransport, NcclNative> {
 public:
  // Selects the device (Config::device, default the local rank on its host), meets the
  // other ranks through init.store ("nccl/id"), creates the communicator and
  // exchanges the link rows. Throws comm::Error on failure (no device:
  // unsupported; bad device: invalid_config; NCCL: transport_failure; peers
  // missing: timeout).
  explicit NcclTransport(const TransportInit& init);
  ~NcclTransport() override;

  // No isend/irecv: point-to-point through the host executor cannot work on a
  // stream-ordered transport (Transport's defaults throw unsupported). progress() polls
  // NCCL's asynchronous error and throws the communicator's error if it failed.
  COMM_TRANSPORT_PROGRESS_OVERRIDES;

  StreamEngine* stream_engine() noexcept override;

  // ---- for NcclNative and NcclStreamEngine

  // Link from rank a to rank b, identical on every rank.
  const LinkInfo& link_between(int a, int b) const { return matrix_[static_cast<std::size_t>(a) * size_ + b]; }
  int nccl_version() const noexcept { return version_; }
  int device() const noexcept { return device_; }
  // Per-operation timeout: `requested`, or Config::timeout when zero.
  std::chrono::milliseconds timeout_for(std::chrono::milliseconds requested) const noexcept;

  // Serialises one operation's NCCL calls against the watchdog's abort.
  // Throws communicator_failed if the communicator failed earlier.
  class Call {
   public:
    Call(NcclTransport& t, std::string op, std::uint64_t sequence, std::chrono::milliseconds timeout);
    ~Call();  // restores the caller's current device
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    ncclComm_t comm() const noexcept { return t_.comm_; }
    // Checks an NCCL return; ncclInProgress is polled to completion (bounded by the timeout).
    void check(ncclResult_t r, std::string_view what);
    void check_cuda(cudaError_t e, std::string_view what);
    // Hands the work just enqueued on `stream` to the watchdog.
    void track(cudaStream_t stream);
    const std::string& op() const noexcept { return op_; }

   private:
    NcclTransport& t_;
    std::unique_lock<std::mutex> lock_;
    std::string op_;
    std::chrono::milliseconds timeout_;
    Clock::time_point deadline_;
    int caller_device_ = -1;  // -1: unchanged
  };

  // A device word used as the barrier's all-reduce buffer and as the payload
  // of zero-length point-to-point messages (NCCL skips empty ones, which would
  // drop the synchronisation a zero-element step stands for).
  void* token() const noexcept { return token_; }

 private:
  struct Pending {
    cudaEvent_t event;
    Clock::time_point deadline;
    std::string op;
  };

  void bootstrap(const TransportInit& init);
  void exchange_links(Store& store, const PeerTable& hosts);
  void watchdog_loop() noexcept;
  // Records the first failure and aborts the NCCL communicator. Caller holds call_mu_.
  void fail_locked(ErrorCode code, std::string message) noexcept;
  [[noreturn]] void throw_failed() const;
  void destroy_comm() noexcept;

  int device_ = 0;
  int version_ = 0;
  std::chrono::milliseconds default_timeout_{300'000};
  ncclComm_t comm_ = nullptr;
  void* token_ = nullptr;
  std::vector<LinkInfo> matrix_;  // size_ x size_, row = from

  // Failure state: written under call_mu_, read lock-free on the fast path.
  std::atomic<bool> failed_{false};
  ErrorCode fail_code_ = ErrorCode::transport_failure;
  std::string fail_message_;
  mutable std::mutex call_mu_;

  std::mutex wd_mu_;
  std::condition_variable wd_cv_;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> spare_events_;
  bool wd_stop_ = false;
  std::thread watchdog_;

  std::mutex wait_mu_;
  util::InterruptibleWait wake_;

#if COMM_NCCL_HAVE_KERNELS
  NcclStreamEngine engine_{*this};
#endif
};

}  // namespace comm::nccl
