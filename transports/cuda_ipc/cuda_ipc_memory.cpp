// CUDA-IPC peer memory (cuda_ipc_memory.hpp).

#include "cuda_ipc_memory.hpp"

#include "cuda_kernels.hpp"
#include "engine/direct/cpu_executor.hpp"

#include <comm/direct.hpp>
#include <comm/error.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace comm::cuda_ipc {
namespace {

void ok(cudaError_t e, int rank, const std::string& call) {
  if (e != cudaSuccess) throw Error(ErrorCode::transport_failure, cuda_failure(rank, call, static_cast<int>(e)));
}

std::string key(const CudaIpcOptions& o, const std::string& what, int rank) {
  return o.prefix + "/" + what + "/" + std::to_string(rank);
}

}  // namespace

std::string cuda_failure(int rank, const std::string& call, int status) {
  const auto e = static_cast<cudaError_t>(status);
  return "rank " + std::to_string(rank) + ": " + call + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) +
         ")";
}

void upload_and_wait(void* device, const void* host, std::size_t bytes, int rank, const std::string& what) {
  ok(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), rank, "cudaMemcpy(" + what + ")");
  ok(cudaStreamSynchronize(cudaStreamLegacy), rank, "cudaStreamSynchronize after cudaMemcpy(" + what + ")");
}

CudaIpcMemory::CudaIpcMemory(Store& store, int rank, int size, CudaIpcOptions options)
    : store_(&store), rank_(rank), size_(size), options_(std::move(options)) {
  if (size < 1 || rank < 0 || rank >= size)
    throw Error(ErrorCode::invalid_argument, "cuda_ipc: rank " + std::to_string(rank) + " is outside a group of " +
                                                 std::to_string(size) + " ranks");
  if (options_.slots < 2)
    throw Error(ErrorCode::invalid_argument, "cuda_ipc: slots = " + std::to_string(options_.slots) +
                                                 "; direct-memory windows need at least 2 slots");
  if (options_.window_bytes < 64 || options_.window_bytes % 64 != 0)
    throw Error(ErrorCode::invalid_argument, "cuda_ipc: window_bytes = " + std::to_string(options_.window_bytes) +
                                                 " must be a positive multiple of 64");
  info_.memory = MemoryKind::cuda;
  info_.window_bytes = options_.window_bytes;
  info_.slots = options_.slots;
  // For the cost model until measured across GPUs: a system-scope flag crosses
  // PCIe/NVLink in about a microsecond; the rates are NVLink-class. (Two
  // processes on one H200 under MPS hand a flag over in 3.8-5.1 us, a kernel
  // launch included: README.md.)
  info_.flag_latency_us = 1.0;
  info_.read_gbps = 150.0;
  info_.copy_gbps = 1000.0;
  info_.reduce_gbps = 800.0;
  try {
    int device = 0;
    ok(cudaGetDevice(&device), rank_, "cudaGetDevice");
    const std::size_t bytes = options_.window_bytes * options_.slots;
    ok(cudaMalloc(reinterpret_cast<void**>(&own_), bytes), rank_,
       "cudaMalloc(" + std::to_string(bytes) + " B of windows)");
    ok(cudaMemset(own_, 0, bytes), rank_, "cudaMemset(windows)");
    ok(cudaDeviceSynchronize(), rank_, "cudaDeviceSynchronize");
    ok(cudaHostAlloc(reinterpret_cast<void**>(&control_), sizeof(DeviceControl), cudaHostAllocMapped), rank_,
       "cudaHostAlloc(control words)");
    std::memset(static_cast<void*>(control_), 0, sizeof(DeviceControl));
    ok(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_control_), control_, 0), rank_,
       "cudaHostGetDevicePointer(control words)");
    ok(cudaMalloc(reinterpret_cast<void**>(&claim_), sizeof(std::uint32_t)), rank_, "cudaMalloc(claim word)");
    ok(cudaMemset(claim_, 0, sizeof(std::uint32_t)), rank_, "cudaMemset(claim word)");
    ok(cudaDeviceSynchronize(), rank_, "cudaDeviceSynchronize");
    exchange(store);
  } catch (...) {
    close();  // what was set up so far; never throws for a half-built object
    throw;
  }
}

void CudaIpcMemory::exchange(Store& store) {
  cudaIpcMemHandle_t mine{};
  ok(cudaIpcGetMemHandle(&mine, own_), rank_, "cudaIpcGetMemHandle(own windows)");
  store.set(key(options_, "handle", rank_), std::string(reinterpret_cast<const char*>(&mine), sizeof mine));
  bases_.assign(static_cast<std::size_t>(size_), nullptr);
  bases_[static_cast<std::size_t>(rank_)] = own_;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const std::string h = store.get(key(options_, "handle", p), options_.timeout);
    if (h.size() != sizeof(cudaIpcMemHandle_t))
      throw Error(ErrorCode::store_failure, "cuda_ipc: rank " + std::to_string(rank_) + " got a handle of " +
                                                std::to_string(h.size()) + " B from rank " + std::to_string(p) +
                                                ", expected " + std::to_string(sizeof(cudaIpcMemHandle_t)));
    cudaIpcMemHandle_t theirs{};
    std::memcpy(&theirs, h.data(), sizeof theirs);
    void* mapped = nullptr;
    ok(cudaIpcOpenMemHandle(&mapped, theirs, cudaIpcMemLazyEnablePeerAccess), rank_,
       "cudaIpcOpenMemHandle(rank " + std::to_string(p) + "'s windows)");
    bases_[static_cast<std::size_t>(p)] = static_cast<std::byte*>(mapped);
  }
  std::byte** dev = nullptr;
  ok(cudaMalloc(reinterpret_cast<void**>(&dev), sizeof(std::byte*) * bases_.size()), rank_, "cudaMalloc(bases)");
  device_bases_ = dev;
  upload_and_wait(dev, bases_.data(), sizeof(std::byte*) * bases_.size(), rank_, "bases");
}

CudaIpcMemory::~CudaIpcMemory() {
  try {
    close();
  } catch (...) {  // destructors never throw; close() reports to whoever calls it
  }
}

void CudaIpcMemory::close() {
  if (closed_) return;
  closed_ = true;
  std::string first;
  auto note = [&](cudaError_t e, const std::string& call) {
    if (e != cudaSuccess && first.empty()) first = cuda_failure(rank_, call, static_cast<int>(e));
  };
  for (int p = 0; p < static_cast<int>(bases_.size()); ++p)
    if (p != rank_ && bases_[static_cast<std::size_t>(p)])
      note(cudaIpcCloseMemHandle(bases_[static_cast<std::size_t>(p)]),
           "cudaIpcCloseMemHandle(rank " + std::to_string(p) + "'s windows)");
  bases_.clear();
  if (device_bases_) note(cudaFree(const_cast<std::byte**>(device_bases_)), "cudaFree(bases)");
  device_bases_ = nullptr;
  if (own_) {
    // Free ours only once every peer unmapped it (or could not be heard from in time).
    bool all_closed = true;
    try {
      store_->set(key(options_, "closed", rank_), "1");
      std::vector<std::string> keys;
      for (int p = 0; p < size_; ++p)
        if (p != rank_) keys.push_back(key(options_, "closed", p));
      if (!keys.empty()) store_->wait(keys, options_.timeout);
    } catch (const Error&) {
      all_closed = false;
    }
    note(cudaFree(own_), "cudaFree(own windows)");
    own_ = nullptr;
    if (!all_closed && first.empty())
      first = "rank " + std::to_string(rank_) + ": cuda_ipc: freed its windows without hearing from every peer";
  }
  if (claim_) note(cudaFree(claim_), "cudaFree(claim word)");
  claim_ = nullptr;
  if (control_) note(cudaFreeHost(control_), "cudaFreeHost(control words)");
  control_ = nullptr;
  device_control_ = nullptr;
  if (!first.empty()) throw Error(ErrorCode::transport_failure, first);
}

std::byte* CudaIpcMemory::window(int rank, unsigned slot) const noexcept {
  if (rank < 0 || rank >= static_cast<int>(bases_.size()) || slot >= info_.slots) return nullptr;
  return bases_[static_cast<std::size_t>(rank)] + slot * info_.window_bytes;
}

void CudaIpcMemory::signal(unsigned slot, std::uint64_t value, void* stream) noexcept {
  auto* flag = reinterpret_cast<std::uint64_t*>(window(rank_, slot));
  if (!flag) return;
  if (launch_signal(flag, value, static_cast<cudaStream_t>(stream)) != cudaSuccess && control_)
    std::atomic_ref<std::uint32_t>(control_->abort).store(1);  // a lost signal must not leave peers spinning here
}

void CudaIpcMemory::wait(unsigned slot, std::span<const FlagWait> waits,
                         std::chrono::steady_clock::time_point deadline, void* stream) {
  if (slot >= info_.slots)
    throw Error(ErrorCode::invalid_argument, "cuda_ipc wait: slot " + std::to_string(slot) + " of " +
                                                 std::to_string(info_.slots));
  const auto left = std::max(std::chrono::steady_clock::duration::zero(), deadline - std::chrono::steady_clock::now());
  const auto ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(left).count());
  FlagWaits batch;
  auto flush = [&] {
    if (batch.count == 0) return;
    ok(launch_wait(batch, ns, device_control(), static_cast<cudaStream_t>(stream)), rank_, "launch of the flag wait");
    batch.count = 0;
  };
  for (const FlagWait& w : waits) {
    if (w.rank < 0 || w.rank >= size_)
      throw Error(ErrorCode::invalid_argument, "cuda_ipc wait: rank " + std::to_string(w.rank) + " of " +
                                                   std::to_string(size_));
    batch.flag[batch.count] = reinterpret_cast<const std::uint64_t*>(window(w.rank, slot));
    batch.value[batch.count] = w.value;
    batch.rank[batch.count] = w.rank;
    if (++batch.count == kMaxWaitsPerLaunch) flush();
  }
  flush();
}

void CudaIpcMemory::check() const {
  if (!control_) return;
  const std::uint32_t f = std::atomic_ref<std::uint32_t>(control_->status.failure).load(std::memory_order_acquire);
  if (f == 0) return;
  const DeviceStatus& s = control_->status;
  const std::string call = "direct-memory call #" + std::to_string(s.seq) + " on the device";
  switch (static_cast<DeviceFailure>(f)) {
    case DeviceFailure::none: return;
    case DeviceFailure::timeout:
      throw Error(ErrorCode::timeout, "rank " + std::to_string(rank_) + ": " + call + ": rank " +
                                          std::to_string(s.rank) + " did not arrive within " +
                                          std::to_string(options_.timeout.count()) + " ms (its flag is at call " +
                                          std::to_string(s.value >> kDirectStepBits) + ", step " +
                                          std::to_string(s.value & ((1u << kDirectStepBits) - 1)) + ")");
    case DeviceFailure::aborted:
      throw Error(ErrorCode::aborted, "rank " + std::to_string(rank_) + ": " + call + " aborted");
    case DeviceFailure::mismatch:
      throw Error(ErrorCode::mismatch, "rank " + std::to_string(rank_) + ": " + call + ": rank " +
                                           std::to_string(s.rank) + " is in " + direct::describe_call_word(s.value) +
                                           " while this rank is in " + direct::describe_call_word(s.expected) +
                                           "; every rank must make the same calls in the same order");
  }
  throw Error(ErrorCode::internal, "cuda_ipc: unknown device failure " + std::to_string(f));
}

void CudaIpcMemory::abort() noexcept {
  if (control_) std::atomic_ref<std::uint32_t>(control_->abort).store(1, std::memory_order_release);
}

}  // namespace comm::cuda_ipc
