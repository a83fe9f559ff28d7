#pragma once
// The CUDA executor of direct-memory programs: runs the core's direct-memory
// all-reduce algorithms (mem_oneshot, mem_twoshot: the very programs the CPU
// executor runs, built by the same builders) as one cooperative kernel per
// call over CudaIpcMemory's windows, on the caller's stream.
//
// Blocking: allreduce() only enqueues and never synchronises the host, so a
// sequence of calls can be captured in a CUDA graph and replayed (the call
// number lives in device memory and advances on the device). The first call
// of a (algorithm, count, dtype) builds and uploads its plan, which blocks:
// make it outside capture, or call prepare() first; inside capture a missing
// plan is a usage error.
//
// Errors: usage errors (unknown algorithm, buffers not device memory, a count
// that does not fit the windows, partly overlapping buffers) are thrown before
// anything is enqueued. A wait that times out or is aborted on the device is
// recorded and thrown by check() (and by the next allreduce()), naming the peer.
// Threading: one thread at a time, and one stream at a time: the call number
// on the device advances in launch order, so calls on streams that may run
// concurrently would race for it (order them with events).

#include "cuda_ipc_memory.hpp"
#include "device_program.hpp"

#include <comm/types.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>

namespace comm::cuda_ipc {

struct DevicePlan;

class CudaDirectEngine {
 public:
  explicit CudaDirectEngine(CudaIpcMemory& memory);
  ~CudaDirectEngine();
  CudaDirectEngine(const CudaDirectEngine&) = delete;
  CudaDirectEngine& operator=(const CudaDirectEngine&) = delete;

  /// Enqueues an all-reduce of `count` elements from `input` to `output`
  /// (device memory; equal pointers: in place) on `stream` (cudaStream_t).
  void allreduce(const void* input, void* output, std::size_t count, DataType dtype, ReduceOp op,
                 std::string_view algorithm, void* stream);
  /// Builds and uploads the plan of such a call (blocking; not inside capture).
  void prepare(std::size_t count, DataType dtype, std::string_view algorithm);
  /// True when `algorithm` can run `count` elements of `dtype` in these windows.
  bool fits(std::size_t count, DataType dtype, std::string_view algorithm) const;
  /// Throws the first failure recorded on the device (see CudaIpcMemory::check).
  void check() const { memory_.check(); }

 private:
  const DevicePlan& plan(std::size_t count, DataType dtype, std::string_view algorithm, void* stream);
  CudaIpcMemory& memory_;
  int multiprocessors_ = 1;
  void* state_ = nullptr;  // DeviceState in device memory
  using Key = std::tuple<std::string, std::size_t, std::size_t>;
  std::map<Key, std::unique_ptr<DevicePlan>> plans_;
};

}  // namespace comm::cuda_ipc
