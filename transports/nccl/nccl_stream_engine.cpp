// The NCCL stream engine: runs one of our schedules on the caller's stream,
// wave by wave (nccl_plan.hpp says how steps are grouped and why): each wave
// launches its local steps (our reduction kernel, cudaMemcpyAsync) and then
// its sends and receives as one ncclGroupStart/End, so one NCCL launch serves
// every peer of the wave. Stream order makes each wave wait for the previous.

#include "nccl_plan.hpp"
#include "nccl_transport.hpp"
#include "reduce_kernels.hpp"

#include <algorithm>
#include <vector>

namespace comm::nccl {
namespace {

std::byte* base_of(const ScheduleBuffers& buffers, BufferId b) {
  switch (b) {
    case BufferId::input: return static_cast<std::byte*>(const_cast<void*>(buffers.input));
    case BufferId::output: return static_cast<std::byte*>(buffers.output);
    case BufferId::scratch: return static_cast<std::byte*>(buffers.scratch);
  }
  return nullptr;
}

// Every region a step uses has a buffer. Returns the extent of the output
// the steps write (what avg divides), in elements.
std::size_t check_steps(const Schedule& schedule, const ScheduleBuffers& buffers) {
  std::size_t avg_extent = 0;
  for (StepId i = 0; i < schedule.steps.size(); ++i) {
    const Step& st = schedule.steps[i];
    for (const Region* r : {&st.src, &st.src2, &st.dst}) {
      const bool used = (r == &st.dst) ? st.kind != StepKind::send
                                       : (r == &st.src ? st.kind != StepKind::recv : st.kind == StepKind::reduce);
      if (used && r->count && !base_of(buffers, r->buffer))
        throw Error(ErrorCode::invalid_argument, "nccl stream engine: step " + std::to_string(i) +
                                                     " uses a null buffer (input, output or scratch)");
    }
    if (st.kind != StepKind::send && st.dst.buffer == BufferId::output)
      avg_extent = std::max(avg_extent, st.dst.offset + st.dst.count);
  }
  return avg_extent;
}

void check_device_memory(const ScheduleBuffers& buffers) {
  for (const void* p : {buffers.input, static_cast<const void*>(buffers.output)}) {
    if (!p) continue;
    const RelaxedCapture relaxed;  // a query, legal while the caller captures a graph
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess ||
        (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)) {
      cudaGetLastError();
      throw Error(ErrorCode::invalid_argument,
                  "nccl stream engine: a schedule buffer is not CUDA device memory; allocate it with cudaMalloc");
    }
  }
}

}  // namespace

void* NcclStreamEngine::allocate_scratch(std::size_t bytes) {
  check_cuda(cudaSetDevice(t_.device()), "cudaSetDevice");
  void* p = nullptr;
  // Allocated once per communicator and size (the core keeps it), so the
  // synchronous cudaMalloc stays out of the hot path; relaxed so that a first
  // call made while the application captures a graph still works.
  const RelaxedCapture relaxed;
  check_cuda(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)),
             "cudaMalloc of " + std::to_string(bytes) + " bytes of schedule scratch");
  return p;
}

void NcclStreamEngine::release_scratch(void* p) noexcept {
  if (!p) return;
  cudaSetDevice(t_.device());
  const RelaxedCapture relaxed;
  cudaFree(p);  // waits for work still using it
}

void NcclStreamEngine::enqueue(const Schedule& schedule, const ScheduleBuffers& buffers, DataType dtype,
                               ReduceOp op, int world_size, std::uint64_t sequence, void* stream_handle) {
  const std::size_t es = dtype_size(dtype);
  auto at = [&](const Region& r) -> std::byte* {
    std::byte* b = base_of(buffers, r.buffer);
    return b ? b + r.offset * es : nullptr;
  };
  // Usage checks first, before anything is enqueued.
  const std::size_t avg_extent = check_steps(schedule, buffers);
  check_device_memory(buffers);
  const auto waves = plan_waves(schedule);

  auto stream = static_cast<cudaStream_t>(stream_handle);
  NcclTransport::Call call(t_, "schedule", sequence, std::chrono::milliseconds(0));
  const ncclComm_t comm = call.comm();
  auto* token = static_cast<std::byte*>(t_.token());
  for (const Wave& wave : waves) {
    bool group_open = false;
    ncclResult_t first = ncclSuccess;
    std::vector<StepId> order(wave.local);
    order.insert(order.end(), wave.messages.begin(), wave.messages.end());
    for (StepId id : order) {
      const Step& st = schedule.steps[id];
      std::byte* dst = at(st.dst);
      const std::byte* src = at(st.src);
      switch (st.kind) {
        case StepKind::reduce:
          call.check_cuda(launch_reduce(dst, src, at(st.src2), st.dst.count, dtype, op, stream),
                          "reduction kernel launch");
          break;
        case StepKind::copy:
          if (st.dst.count && dst != src)
            call.check_cuda(cudaMemcpyAsync(dst, src, st.dst.count * es, cudaMemcpyDeviceToDevice, stream),
                            "cudaMemcpyAsync");
          break;
        case StepKind::send:
        case StepKind::recv: {
          if (!group_open) {
            call.check(ncclGroupStart(), "ncclGroupStart");
            group_open = true;
          }
          if (first != ncclSuccess) break;
          // NCCL drops empty messages; a zero-element step still synchronises
          // the two ranks, so it carries one byte of the token word instead.
          const bool empty = (st.kind == StepKind::send ? st.src.count : st.dst.count) == 0;
          if (st.kind == StepKind::send)
            first = empty ? ncclSend(token, 1, ncclUint8, st.peer, comm, stream)
                          : ncclSend(src, st.src.count * es, ncclUint8, st.peer, comm, stream);
          else
            first = empty ? ncclRecv(token + 4, 1, ncclUint8, st.peer, comm, stream)
                          : ncclRecv(dst, st.dst.count * es, ncclUint8, st.peer, comm, stream);
          break;
        }
      }
    }
    if (group_open) {
      const ncclResult_t end = ncclGroupEnd();
      if (first != ncclSuccess) call.check(first, "ncclSend/ncclRecv");
      call.check(end, "ncclGroupEnd");
    }
  }
  if (op == ReduceOp::avg && world_size > 1 && avg_extent > 0)
    call.check_cuda(launch_divide(buffers.output, avg_extent, dtype, world_size, stream), "average kernel launch");
  call.track(stream);
}

}  // namespace comm::nccl
