// The CUDA executor of direct-memory programs (cuda_direct_engine.hpp).

#include "cuda_direct_engine.hpp"

#include "cuda_kernels.hpp"
#include "engine/direct/cpu_executor.hpp"
#include "engine/direct/direct_algorithm.hpp"
#include "engine/tags.hpp"

#include <comm/error.hpp>

#include <cuda_runtime.h>

#include <vector>

namespace comm::cuda_ipc {

struct DevicePlan {
  const direct::DirectAlgorithm* algorithm = nullptr;
  DeviceProgram program;
  DeviceOp* ops = nullptr;
  DeviceRef* srcs = nullptr;
  unsigned blocks = 1;
  ~DevicePlan() {
    cudaFree(ops);
    cudaFree(srcs);
  }
};

namespace {

void ok(cudaError_t e, int rank, const std::string& call) {
  if (e != cudaSuccess) throw Error(ErrorCode::transport_failure, cuda_failure(rank, call, static_cast<int>(e)));
}

const direct::DirectAlgorithm& find_allreduce(std::string_view name) {
  const direct::DirectAlgorithm* a = direct::find_direct_algorithm(Collective::allreduce, name);
  if (!a)
    throw Error(ErrorCode::unknown_algorithm, "cuda_ipc allreduce: no direct-memory algorithm '" +
                                                  std::string(name) + "' (mem_oneshot, mem_twoshot)");
  return *a;
}

direct::DirectArgs args_of(const CudaIpcMemory& m, std::size_t count, std::size_t elem, int rank) {
  direct::DirectArgs d;
  d.collective = Collective::allreduce;
  d.rank = rank;
  d.nranks = m.size();
  d.count = count;
  d.elem_size = elem;
  d.window_bytes = m.info().window_bytes;
  return d;
}

void check_device_pointer(const void* p, const char* name, int rank) {
  cudaPointerAttributes attr{};
  const cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess || (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)) {
    cudaGetLastError();  // clear the sticky-free error of an unknown pointer
    throw Error(ErrorCode::invalid_argument, "rank " + std::to_string(rank) + ": cuda_ipc allreduce: `" + name +
                                                 "` is not device memory (the windows are; pass cudaMalloc'd buffers)");
  }
}

}  // namespace

CudaDirectEngine::CudaDirectEngine(CudaIpcMemory& memory) : memory_(memory) {
  int device = 0;
  ok(cudaGetDevice(&device), memory_.rank(), "cudaGetDevice");
  ok(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, device), memory_.rank(),
     "cudaDeviceGetAttribute(multiprocessors)");
  int cooperative = 0;
  ok(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device), memory_.rank(),
     "cudaDeviceGetAttribute(cooperative launch)");
  if (!cooperative)
    throw Error(ErrorCode::unsupported, "rank " + std::to_string(memory_.rank()) + ": device " +
                                            std::to_string(device) + " cannot launch cooperative kernels");
  ok(cudaMalloc(&state_, sizeof(DeviceState)), memory_.rank(), "cudaMalloc(device state)");
  const DeviceState initial{};
  upload_and_wait(state_, &initial, sizeof initial, memory_.rank(), "device state");
}

CudaDirectEngine::~CudaDirectEngine() {
  plans_.clear();
  cudaFree(state_);
}

bool CudaDirectEngine::fits(std::size_t count, DataType dtype, std::string_view algorithm) const {
  const direct::DirectAlgorithm& a = find_allreduce(algorithm);
  return !a.eligible || a.eligible(args_of(memory_, count, dtype_size(dtype), memory_.rank()));
}

const DevicePlan& CudaDirectEngine::plan(std::size_t count, DataType dtype, std::string_view algorithm, void* stream) {
  const std::size_t elem = dtype_size(dtype);
  const Key key{std::string(algorithm), count, elem};
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
  const int rank = memory_.rank();
  const direct::DirectAlgorithm& a = find_allreduce(algorithm);
  if (!fits(count, dtype, algorithm))
    throw Error(ErrorCode::unsupported, "rank " + std::to_string(rank) + ": cuda_ipc allreduce: '" +
                                            std::string(algorithm) + "' does not fit " + std::to_string(count * elem) +
                                            " B per rank in windows of " +
                                            std::to_string(memory_.info().window_bytes) + " B (raise window_bytes)");
  if (stream) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    ok(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capture), rank, "cudaStreamIsCapturing");
    if (capture != cudaStreamCaptureStatusNone)
      throw Error(ErrorCode::invalid_argument,
                  "rank " + std::to_string(rank) + ": cuda_ipc allreduce of " + std::to_string(count) +
                      " elements by '" + std::string(algorithm) +
                      "' inside stream capture has no plan yet: call it once (or prepare()) before capturing");
  }
  // Every rank's program, as the host engine builds them, so `synced` is known.
  std::vector<DirectProgram> all;
  for (int r = 0; r < memory_.size(); ++r) {
    direct::ProgramBuilder b(r, memory_.size());
    a.build(args_of(memory_, count, elem, r), b);
    all.push_back(std::move(b).finish());
  }
  direct::analyse(all);
  auto p = std::make_unique<DevicePlan>();
  p->algorithm = &a;
  p->program = lower(all[static_cast<std::size_t>(rank)]);
  const auto& ops = p->program.ops;
  const auto& srcs = p->program.srcs;
  ok(cudaMalloc(reinterpret_cast<void**>(&p->ops), sizeof(DeviceOp) * ops.size()), rank, "cudaMalloc(plan)");
  upload_and_wait(p->ops, ops.data(), sizeof(DeviceOp) * ops.size(), rank, "plan");
  if (!srcs.empty()) {
    ok(cudaMalloc(reinterpret_cast<void**>(&p->srcs), sizeof(DeviceRef) * srcs.size()), rank, "cudaMalloc(plan)");
    upload_and_wait(p->srcs, srcs.data(), sizeof(DeviceRef) * srcs.size(), rank, "plan");
  }
  p->blocks = blocks_for_program(p->program.largest_op, multiprocessors_);
  return *plans_.emplace(key, std::move(p)).first->second;
}

void CudaDirectEngine::prepare(std::size_t count, DataType dtype, std::string_view algorithm) {
  plan(count, dtype, algorithm, nullptr);
}

void CudaDirectEngine::allreduce(const void* input, void* output, std::size_t count, DataType dtype, ReduceOp op,
                                 std::string_view algorithm, void* stream) {
  memory_.check();
  const int rank = memory_.rank();
  const std::size_t bytes = count * dtype_size(dtype);
  if (count > 0) {
    if (!input || !output)
      throw Error(ErrorCode::invalid_argument, "rank " + std::to_string(rank) + ": cuda_ipc allreduce: `" +
                                                   std::string(input ? "output" : "input") + "` is null");
    check_device_pointer(input, "input", rank);
    check_device_pointer(output, "output", rank);
    const auto* in = static_cast<const std::byte*>(input);
    const auto* out = static_cast<const std::byte*>(output);
    if (in != out && in < out + bytes && out < in + bytes)
      throw Error(ErrorCode::invalid_argument, "rank " + std::to_string(rank) +
                                                   ": cuda_ipc allreduce: `input` and `output` overlap without "
                                                   "being equal (pass the same pointer for in place)");
  }
  const DevicePlan& p = plan(count, dtype, algorithm, stream);
  ProgramLaunch l;
  l.ops = p.ops;
  l.nops = static_cast<std::uint32_t>(p.program.ops.size());
  l.srcs = p.srcs;
  l.synced = p.program.synced ? 1 : 0;
  l.input = static_cast<const std::byte*>(input);
  l.output = static_cast<std::byte*>(output);
  l.bases = memory_.device_bases();
  l.slot_bytes = memory_.info().window_bytes;
  l.slots = memory_.info().slots;
  l.rank = rank;
  l.nranks = memory_.size();
  const auto index = static_cast<std::size_t>(p.algorithm - direct::all_direct_algorithms().data());
  l.call_word = direct::call_word(detail::call_signature(Collective::allreduce, dtype, op, 0), index, count);
  l.state = static_cast<DeviceState*>(state_);
  l.control = memory_.device_control();
  l.timeout_ns = static_cast<std::uint64_t>(std::chrono::nanoseconds(memory_.timeout()).count());
  l.avg_elems = op == ReduceOp::avg ? count : 0;
  ok(launch_program(l, dtype, op, p.blocks, static_cast<cudaStream_t>(stream)), rank,
     "launch of the " + std::string(algorithm) + " kernel");
}

}  // namespace comm::cuda_ipc
