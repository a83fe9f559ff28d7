#pragma once
// CUDA-IPC peer memory: the DirectMemory of ranks that share one host (two
// processes on one device included). Every rank cudaMalloc()s its windows
// (`slots` slots of `window_bytes`, each beginning with its flag word, all
// zero at start), publishes the cudaIpcMemHandle_t of that allocation through
// the store, and opens every peer's with cudaIpcOpenMemHandle, so window()
// returns device addresses valid in this process.
//
// Ownership: owns its allocation, the peers' mappings and the mapped-host
// DeviceControl words. close() (or the destructor) closes the peers'
// mappings, waits through the store (bounded by `timeout`) until every rank
// closed its mappings of ours, then frees ours: no peer reads freed memory.
//
// Errors: the constructor throws comm::Error naming this rank, the peer and
// the CUDA call that failed (no device, IPC unsupported, handles of another
// device), or store_failure/timeout naming the rank not heard from.
// Threading: one thread at a time; abort() from any thread.

#include "device_status.hpp"

#include <comm/store.hpp>
#include <comm/transport.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace comm::cuda_ipc {

struct CudaIpcOptions {
  std::size_t window_bytes = std::size_t{4} << 20;  ///< one slot, flag word included
  unsigned slots = 2;
  std::chrono::milliseconds timeout{30000};          ///< store exchanges and every flag wait
  std::string prefix = "cuda_ipc";                   ///< store keys, unique per communicator
};

class CudaIpcMemory final : public DirectMemory {
 public:
  CudaIpcMemory(Store& store, int rank, int size, CudaIpcOptions options = {});
  ~CudaIpcMemory() override;
  CudaIpcMemory(const CudaIpcMemory&) = delete;
  CudaIpcMemory& operator=(const CudaIpcMemory&) = delete;

  DirectMemoryInfo info() const noexcept override { return info_; }
  std::byte* window(int rank, unsigned slot) const noexcept override;
  /// Enqueues on `stream` (cudaStream_t; nullptr: the legacy stream) one thread
  /// storing `value` into this rank's flag of `slot`, release, system scope.
  void signal(unsigned slot, std::uint64_t value, void* stream) noexcept override;
  /// Enqueues on `stream` one thread polling the flags (acquire, system scope)
  /// until each reached its value; past `deadline`, or after abort(), it gives
  /// up and records the failure (check() throws it). Returns at once.
  void wait(unsigned slot, std::span<const FlagWait> waits, std::chrono::steady_clock::time_point deadline,
            void* stream) override;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  std::chrono::milliseconds timeout() const noexcept { return options_.timeout; }
  /// Device addresses of every rank's slot 0, by rank, in device memory (for kernels).
  std::byte* const* device_bases() const noexcept { return device_bases_; }
  /// The control words and the claim word as device code sees them.
  DeviceControlRefs device_control() const noexcept { return {device_control_, claim_}; }
  /// Throws the first failure device code recorded (timeout naming the peer, aborted,
  /// mismatch naming the peer and both calls); the failure stays recorded.
  void check() const;
  /// Makes every pending and later device wait give up. Safe from any thread.
  void abort() noexcept;
  /// Releases everything (see the file comment); throws on a CUDA failure. Idempotent.
  void close();

 private:
  void exchange(Store& store);
  Store* store_;
  int rank_, size_;
  CudaIpcOptions options_;
  DirectMemoryInfo info_;
  std::byte* own_ = nullptr;
  std::vector<std::byte*> bases_;  // by rank, as mapped here
  std::byte* const* device_bases_ = nullptr;
  DeviceControl* control_ = nullptr;         // host address
  DeviceControl* device_control_ = nullptr;  // device address of the same words
  std::uint32_t* claim_ = nullptr;           // device memory (see device_status.hpp)
  bool closed_ = false;
};

/// "rank 1: cudaIpcOpenMemHandle(rank 0's windows): invalid device context (cudaErrorInvalidContext)".
std::string cuda_failure(int rank, const std::string& call, int status);

/// Copies `bytes` from host memory to device memory and returns once they have
/// landed. cudaMemcpy from pageable memory may return while its DMA is still
/// under way, and a kernel on a non-blocking stream does not wait for it: on a
/// GPU shared through MPS one read the end of a 4 MiB input before it arrived.
void upload_and_wait(void* device, const void* host, std::size_t bytes, int rank, const std::string& what);

}  // namespace comm::cuda_ipc
