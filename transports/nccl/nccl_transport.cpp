#include "nccl_transport.hpp"

#include <comm/version.hpp>

#include <comm/export.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

namespace comm::nccl {

using namespace std::chrono_literals;

namespace {

std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

std::string nccl_error_text(ncclResult_t r, ncclComm_t comm) {
  std::string s = ncclGetErrorString(r);
  const char* last = comm ? ncclGetLastError(comm) : nullptr;
  if (last && *last) s += std::string(" (") + last + ")";
  return s;
}

void info(const Config* cfg, int rank, const std::string& msg) {
  if (cfg && cfg->log_level >= LogLevel::info) std::fprintf(stderr, "comm[%d] info: nccl: %s\n", rank, msg.c_str());
}

}  // namespace

void check_cuda(cudaError_t e, std::string_view what) {
  if (e != cudaSuccess)
    throw Error(ErrorCode::transport_failure,
                "nccl transport: " + std::string(what) + " failed: " + cudaGetErrorString(e));
}

ncclDataType_t to_nccl(DataType t) noexcept {
  switch (t) {
    case DataType::f32: return ncclFloat32;
    case DataType::f64: return ncclFloat64;
    case DataType::f16: return ncclFloat16;
    case DataType::bf16: return ncclBfloat16;
    case DataType::i8: return ncclInt8;
    case DataType::u8: return ncclUint8;
    case DataType::i32: return ncclInt32;
    case DataType::i64: return ncclInt64;
  }
  return ncclUint8;
}

// ---------------------------------------------------------------- creation

NcclTransport::NcclTransport(const TransportInit& init) : NativeTransportBase("nccl", init, *this) {
  if (!init.store || !init.peers)
    throw Error(ErrorCode::invalid_argument,
                "nccl transport: TransportInit::store and ::peers are required; ranks meet through the store");
  if (init.config) default_timeout_ = init.config->timeout;

  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    throw Error(ErrorCode::unsupported,
                "nccl transport: no CUDA device: cudaGetDeviceCount returned " +
                    std::string(e == cudaSuccess ? "0 devices" : cudaGetErrorString(e)) +
                    "; run on a machine with an NVIDIA GPU or choose another transport");
  // Default: the rank's position among the ranks of its host (peer table).
  const int wanted =
      init.config && init.config->device >= 0 ? init.config->device : (*init.peers)[rank_].local_rank;
  if (wanted < 0 || wanted >= count)
    throw Error(ErrorCode::invalid_config,
                "nccl transport: rank " + std::to_string(rank_) + " asked for CUDA device " + std::to_string(wanted) +
                    " (COMM_DEVICE, default: its local rank on this host) but " + std::to_string(count) +
                    " device(s) are visible; set COMM_DEVICE or COMM_LOCAL_RANK to 0.." + std::to_string(count - 1));
  device_ = wanted;
  check_cuda(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
  if (ncclGetVersion(&version_) != ncclSuccess) version_ = NCCL_VERSION_CODE;

  check_cuda(cudaMalloc(&token_, 8), "cudaMalloc of the 8-byte token buffer");
  try {
    check_cuda(cudaMemset(token_, 0, 8), "cudaMemset of the token buffer");
    exchange_links(*init.store, *init.peers);
    bootstrap(init);  // leaves no communicator behind when it throws
  } catch (...) {
    cudaFree(token_);
    throw;
  }
  watchdog_ = std::thread([this] { watchdog_loop(); });
  info(init.config, rank_,
       "rank " + std::to_string(rank_) + "/" + std::to_string(size_) + " on CUDA device " + std::to_string(device_) +
           ", NCCL " + std::to_string(version_));
}

void NcclTransport::exchange_links(Store& store, const PeerTable& hosts) {
  char bus[32] = {};
  check_cuda(cudaDeviceGetPCIBusId(bus, sizeof bus, device_), "cudaDeviceGetPCIBusId");
  store.set("nccl/bus/" + std::to_string(rank_), bus);
  std::vector<PeerIdentity> peers(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r)
    peers[r] = {hosts[r].host, store.get("nccl/bus/" + std::to_string(r), default_timeout_)};
  // Every rank publishes its row and reads all rows, so the matrix (and every
  // prediction made from it) is identical on all ranks: divergent algorithm
  // choices would hang.
  store.set("nccl/links/" + std::to_string(rank_), encode_links(detect_links(rank_, peers)));
  matrix_.reserve(static_cast<std::size_t>(size_) * size_);
  for (int r = 0; r < size_; ++r) {
    auto row = decode_links(store.get("nccl/links/" + std::to_string(r), default_timeout_), size_);
    matrix_.insert(matrix_.end(), row.begin(), row.end());
  }
}

void NcclTransport::bootstrap(const TransportInit& init) {
  ncclUniqueId id{};
  if (rank_ == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
      throw Error(ErrorCode::transport_failure,
                  std::string("nccl transport: ncclGetUniqueId failed: ") + ncclGetErrorString(r) +
                      " (check NCCL_SOCKET_IFNAME; NCCL_DEBUG=WARN tells more)");
    init.store->set("nccl/id", std::string(id.internal, sizeof id.internal));
  } else {
    const std::string v = init.store->get("nccl/id", default_timeout_);
    if (v.size() != sizeof id.internal)
      throw Error(ErrorCode::store_failure, "nccl transport: store key nccl/id holds " + std::to_string(v.size()) +
                                                " bytes, expected " + std::to_string(sizeof id.internal));
    std::memcpy(id.internal, v.data(), sizeof id.internal);
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init and abort return at once; we poll with a deadline
  ncclResult_t r = ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
  const auto deadline = Clock::now() + default_timeout_;
  while (r == ncclInProgress || (r == ncclSuccess && comm_)) {
    ncclResult_t state = ncclSuccess;
    r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) break;
    r = state;
    if (r != ncclInProgress) break;
    if (Clock::now() > deadline) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
      throw Error(ErrorCode::timeout, "nccl transport: rank " + std::to_string(rank_) +
                                          ": ncclCommInitRankConfig did not finish within " +
                                          ms_text(default_timeout_) + "; are all " + std::to_string(size_) +
                                          " ranks running, each on its own GPU?");
    }
    std::this_thread::sleep_for(1ms);
  }
  if (r != ncclSuccess) {
    const std::string text = nccl_error_text(r, comm_);
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    throw Error(ErrorCode::transport_failure, "nccl transport: rank " + std::to_string(rank_) +
                                                  ": ncclCommInitRankConfig failed: " + text);
  }
}

NcclTransport::~NcclTransport() {
  {
    std::lock_guard lk(wd_mu_);
    wd_stop_ = true;
  }
  wd_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  destroy_comm();
  for (auto& p : pending_) cudaEventDestroy(p.event);
  for (auto ev : spare_events_) cudaEventDestroy(ev);
  if (token_) cudaFree(token_);
}

void NcclTransport::destroy_comm() noexcept {
  std::lock_guard lk(call_mu_);
  if (!comm_) return;
  // Finalize flushes work still queued for peers; bounded so that a dead peer
  // cannot hang a destructor, after which abort releases everything.
  const auto bound = std::min<std::chrono::milliseconds>(default_timeout_, 30s);
  const auto deadline = Clock::now() + bound;
  cudaSetDevice(device_);
  ncclResult_t state = ncclCommFinalize(comm_);
  while (state == ncclInProgress || state == ncclSuccess) {
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) state = ncclInternalError;
    if (state != ncclInProgress || Clock::now() > deadline) break;
    std::this_thread::sleep_for(1ms);
  }
  if (state == ncclSuccess)
    ncclCommDestroy(comm_);
  else
    ncclCommAbort(comm_);
  comm_ = nullptr;
}

// ---------------------------------------------------------------- interface

TransportCaps NcclTransport::caps() const noexcept {
  // A dead peer is noticed by the watchdog when the work outlives its timeout
  // (or when NCCL's network layer reports it), not promptly.
  return TransportCaps{.host_memory = false, .cuda_memory = true, .stream_ordered = true, .can_block = true,
                       .peer_failure_detection = false};
}

LinkInfo NcclTransport::link(int peer) const {
  check_peer("link", peer);
  return link_between(rank_, peer);
}

bool NcclTransport::progress() {
  if (failed_.load(std::memory_order_acquire)) throw_failed();
  std::unique_lock lk(call_mu_, std::try_to_lock);
  if (lk && comm_) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress) {
      fail_locked(ErrorCode::transport_failure, "nccl transport: asynchronous NCCL error: " + nccl_error_text(state, comm_));
      throw_failed();
    }
  }
  return false;
}

void NcclTransport::wait(Clock::time_point deadline) {
  // Nothing completes on the host side; wake at least every 10 ms so that a
  // caller polling progress() sees asynchronous errors promptly.
  std::unique_lock lk(wait_mu_);
  wake_.wait_until(lk, std::min(deadline, Clock::now() + 10ms));
}

void NcclTransport::interrupt() noexcept { wake_.interrupt(wait_mu_); }

void NcclTransport::cancel(Completion& c) noexcept {
  if (c.is_pending()) c.fail(ErrorCode::aborted, "nccl transport: cancelled");
}

StreamEngine* NcclTransport::stream_engine() noexcept {
#if COMM_NCCL_HAVE_KERNELS
  return &engine_;
#else
  return nullptr;
#endif
}

std::chrono::milliseconds NcclTransport::timeout_for(std::chrono::milliseconds requested) const noexcept {
  return requested.count() > 0 ? requested : default_timeout_;
}

// ---------------------------------------------------------------- failure

void NcclTransport::fail_locked(ErrorCode code, std::string message) noexcept {
  if (failed_.load(std::memory_order_relaxed)) return;
  fail_code_ = code;
  fail_message_ = std::move(message);
  failed_.store(true, std::memory_order_release);
  // Abort releases kernels spinning on a dead peer, so no stream (and no host
  // thread synchronising one) stays hung.
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
  interrupt();
}

// fail_message_ is written once, before failed_ is released, and never again.
void NcclTransport::throw_failed() const {
  throw Error(ErrorCode::communicator_failed, "nccl transport: the communicator failed earlier (" +
                                                  std::string(to_string(fail_code_)) + "): " + fail_message_);
}

NcclTransport::Call::Call(NcclTransport& t, std::string op, std::uint64_t sequence, std::chrono::milliseconds timeout)
    : t_(t), lock_(t.call_mu_), op_(std::move(op) + " #" + std::to_string(sequence)),
      timeout_(t.timeout_for(timeout)), deadline_(Clock::now() + timeout_) {
  if (t_.failed_.load(std::memory_order_acquire) || !t_.comm_) {
    lock_.unlock();
    t_.throw_failed();
  }
  // The calling thread may have another device current; NCCL and our kernels
  // must run on the communicator's device. The caller's is restored after.
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != t_.device_) {
    nccl::check_cuda(cudaSetDevice(t_.device_), op_ + ": cudaSetDevice(" + std::to_string(t_.device_) + ")");
    caller_device_ = current;
  }
}

NcclTransport::Call::~Call() {
  if (caller_device_ >= 0) cudaSetDevice(caller_device_);
}

void NcclTransport::Call::check(ncclResult_t r, std::string_view what) {
  if (r == ncclInProgress) {
    // Non-blocking communicator: the call finishes in the background; NCCL
    // requires it to finish before the next call on this communicator.
    for (;;) {
      ncclResult_t state = ncclSuccess;
      r = ncclCommGetAsyncError(t_.comm_, &state);
      if (r != ncclSuccess) break;
      r = state;
      if (r != ncclInProgress) break;
      if (Clock::now() > deadline_) {
        t_.fail_locked(ErrorCode::timeout, op_ + ": " + std::string(what) + " was still in progress after " +
                                               ms_text(timeout_) + "; NCCL communicator aborted");
        lock_.unlock();
        t_.throw_failed();
      }
      std::this_thread::yield();
    }
  }
  if (r == ncclSuccess) return;
  const std::string text = op_ + ": " + std::string(what) + " failed: " + nccl_error_text(r, t_.comm_);
  if (r == ncclInvalidArgument)  // rejected before anything was enqueued; the communicator is intact
    throw Error(ErrorCode::invalid_argument, "nccl transport: " + text);
  t_.fail_locked(r == ncclRemoteError ? ErrorCode::peer_failed : ErrorCode::transport_failure, text);
  lock_.unlock();
  t_.throw_failed();
}

void NcclTransport::Call::check_cuda(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return;
  t_.fail_locked(ErrorCode::transport_failure, op_ + ": " + std::string(what) + " failed: " + cudaGetErrorString(e));
  lock_.unlock();
  t_.throw_failed();
}

void NcclTransport::Call::track(cudaStream_t stream) {
  // Work captured into a CUDA graph runs when the graph is launched, outside
  // our view; only eagerly enqueued work is followed.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
  if (capture != cudaStreamCaptureStatusNone) return;
  cudaEvent_t ev = nullptr;
  {
    std::lock_guard lk(t_.wd_mu_);
    if (!t_.spare_events_.empty()) {
      ev = t_.spare_events_.back();
      t_.spare_events_.pop_back();
    }
  }
  if (!ev) check_cuda(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  const cudaError_t e = cudaEventRecord(ev, stream);
  if (e != cudaSuccess) cudaEventDestroy(ev);
  check_cuda(e, "cudaEventRecord");
  bool was_idle = false;
  {
    std::lock_guard lk(t_.wd_mu_);
    was_idle = t_.pending_.empty();
    t_.pending_.push_back({ev, Clock::now() + timeout_, op_});
  }
  // A watchdog with work pending looks again within 2 ms anyway; waking it on
  // every call would cost each launch a futex wake and a contended thread.
  if (was_idle) t_.wd_cv_.notify_one();
}

void NcclTransport::watchdog_loop() noexcept {
  cudaSetDevice(device_);
  // Querying events must not invalidate a graph capture in progress on the
  // application's threads (global capture mode forbids it on every thread).
  const RelaxedCapture relaxed;
  std::unique_lock lk(wd_mu_);
  while (!wd_stop_) {
    // Busy streams are checked every 2 ms (error latency), idle ones every 100 ms.
    wd_cv_.wait_for(lk, pending_.empty() ? 100ms : 2ms);
    if (wd_stop_) break;
    ErrorCode code = ErrorCode::internal;
    std::string problem;
    const auto now = Clock::now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      const cudaError_t q = cudaEventQuery(it->event);
      if (q == cudaSuccess) {
        spare_events_.push_back(it->event);
        it = pending_.erase(it);
        continue;
      }
      if (q != cudaErrorNotReady && problem.empty()) {
        code = ErrorCode::transport_failure;
        problem = it->op + ": the GPU reported " + cudaGetErrorString(q);
      } else if (now > it->deadline && problem.empty()) {
        code = ErrorCode::timeout;
        problem = it->op + " did not complete on the GPU within its timeout; a peer may have died or "
                           "called a different collective. NCCL communicator aborted";
      }
      ++it;
    }
    // call_mu_ is taken only without wd_mu_ held: Call holds call_mu_ while
    // it takes wd_mu_ in track().
    lk.unlock();
    if (!problem.empty()) {
      std::lock_guard guard(call_mu_);
      fail_locked(code, "nccl transport: " + problem);
    } else if (std::unique_lock cl(call_mu_, std::try_to_lock); cl && comm_ && !failed_.load(std::memory_order_relaxed)) {
      // When the lock is busy, the thread holding it polls the same error itself.
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress)
        fail_locked(state == ncclRemoteError ? ErrorCode::peer_failed : ErrorCode::transport_failure,
                    "nccl transport: asynchronous NCCL error: " + nccl_error_text(state, comm_));
    }
    lk.lock();
    if (failed_.load(std::memory_order_acquire)) {
      // After an abort nothing more is worth watching; events are freed by the destructor.
      while (!pending_.empty()) {
        spare_events_.push_back(pending_.front().event);
        pending_.pop_front();
      }
    }
  }
}

}  // namespace comm::nccl

extern "C" COMM_API void comm_plugin_register() {
  comm::register_transport("nccl", [](const comm::TransportInit& init) -> std::unique_ptr<comm::Transport> {
    return std::make_unique<comm::nccl::NcclTransport>(init);
  });
  // The library this plugin loaded (ncclGetVersion needs no GPU): e.g. 23203 = 2.32.3.
  int v = 0;
  const bool known = ncclGetVersion(&v) == ncclSuccess;
  if (!known) v = NCCL_VERSION_CODE;
  comm::register_transport_library({"nccl", "NCCL",
                                    std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." +
                                        std::to_string(v % 100),
                                    known ? "ncclGetVersion()" : "NCCL_VERSION_CODE at build time"});
}
