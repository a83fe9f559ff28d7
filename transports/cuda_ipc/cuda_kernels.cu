// Kernels of the CUDA-IPC direct-memory executor: one cooperative kernel runs
// a rank's whole lowered program (device_program.hpp) — loads from the peers'
// windows, reductions in source order, stores, and sequence-numbered flags
// polled and raised at system scope — plus the single-thread flag kernels of
// CudaIpcMemory::signal/wait.
//
// The call number lives in device memory (DeviceState) and is advanced by the
// kernel, so a CUDA graph that captured N calls replays them with fresh call
// numbers each time: flags only grow, as on the host (comm/direct.hpp).
// A wait that gives up (deadline, abort) records the failure and lets the
// grid run on to the end, so no block is left waiting at a grid barrier.

#include "cuda_kernels.hpp"
#include "engine/device_reduce_ops.cuh"

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace comm::cuda_ipc {
namespace {

namespace cg = cooperative_groups;

__device__ __forceinline__ std::uint64_t load_acquire(const std::uint64_t* p) {
  std::uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void store_release(std::uint64_t* p, std::uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ std::uint64_t now_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ std::uint64_t flag_value(std::uint64_t seq, std::uint32_t step) {
  return seq << kDirectStepBits | step;
}

// The first failure wins; the others are dropped.
__device__ void record(const DeviceControlRefs& c, DeviceFailure f, int rank, std::uint64_t seq, std::uint64_t value,
                       std::uint64_t expected) {
  if (atomicCAS(c.claim, 0u, 1u) != 0) return;
  volatile DeviceStatus* s = &c.control->status;
  s->rank = rank;
  s->seq = seq;
  s->value = value;
  s->expected = expected;
  __threadfence_system();
  s->failure = static_cast<std::uint32_t>(f);
  __threadfence_system();
}

__device__ bool claimed(const DeviceControlRefs& c) { return *reinterpret_cast<volatile std::uint32_t*>(c.claim) != 0; }

// Polls until *flag >= value; false when it gave up (failure recorded or seen).
__device__ bool poll(const std::uint64_t* flag, std::uint64_t value, int rank, std::uint64_t seq,
                     std::uint64_t timeout_ns, const DeviceControlRefs& c) {
  if (load_acquire(flag) >= value) return true;
  const std::uint64_t start = now_ns();
  for (unsigned spins = 0;; ++spins) {
    const std::uint64_t seen = load_acquire(flag);
    if (seen >= value) return true;
    if ((spins & 63) == 0) {
      if (*reinterpret_cast<const volatile std::uint32_t*>(&c.control->abort) != 0) {
        record(c, DeviceFailure::aborted, rank, seq, seen, value);
        return false;
      }
      if (claimed(c)) return false;
      if (now_ns() - start > timeout_ns) {
        record(c, DeviceFailure::timeout, rank, seq, seen, value);
        return false;
      }
    }
  }
}

__global__ void signal_kernel(std::uint64_t* flag, std::uint64_t value) {
  __threadfence_system();
  store_release(flag, value);
}

__global__ void wait_kernel(FlagWaits w, std::uint64_t timeout_ns, DeviceControlRefs c) {
  for (std::uint32_t i = 0; i < w.count; ++i)
    if (!poll(w.flag[i], w.value[i], w.rank[i], w.value[i] >> kDirectStepBits, timeout_ns, c)) return;
}

using device::Compute;
using device::Max;
using device::Min;
using device::Prod;
using device::Sum;

struct Call {
  const ProgramLaunch& p;
  std::uint64_t seq;
  unsigned slot;
  __device__ std::byte* window(int r) const { return p.bases[r] + slot * p.slot_bytes; }
  __device__ std::byte* address(const DeviceRef& r) const {
    switch (r.space) {
      case DirectSpace::input: return const_cast<std::byte*>(p.input) + r.offset;
      case DirectSpace::output: return p.output + r.offset;
      case DirectSpace::window: return window(r.rank) + r.offset;
      case DirectSpace::peer_input:   // never lowered (device_program.cpp refuses programs that read peers)
      case DirectSpace::peer_output:
      case DirectSpace::scratch: break;
    }
    return nullptr;
  }
};

__device__ void copy_bytes(std::byte* dst, const std::byte* src, std::size_t bytes, std::size_t tid,
                           std::size_t threads) {
  if (dst == src) return;
  const bool aligned = ((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src)) & 15) == 0;
  std::size_t done = 0;
  if (aligned) {
    const std::size_t vecs = bytes / 16;
    auto* d = reinterpret_cast<uint4*>(dst);
    const auto* s = reinterpret_cast<const uint4*>(src);
    for (std::size_t i = tid; i < vecs; i += threads) d[i] = s[i];
    done = vecs * 16;
  }
  for (std::size_t i = done + tid; i < bytes; i += threads) dst[i] = src[i];
}

template <class T, class Op>
__device__ void reduce_elems(const Call& c, const DeviceOp& op, const DeviceRef* srcs, std::size_t tid,
                             std::size_t threads) {
  using C = Compute<T, Op>;
  T* dst = reinterpret_cast<T*>(c.address(op.dst));
  T* dst2 = op.has_dst2 ? reinterpret_cast<T*>(c.address(op.dst2)) : nullptr;
  const std::size_t n = op.bytes / sizeof(T);
  for (std::size_t i = tid; i < n; i += threads) {
    auto acc = C::load(reinterpret_cast<const T*>(c.address(srcs[0]))[i]);
    for (std::uint32_t s = 1; s < op.num_srcs; ++s)
      acc = Op::apply(acc, C::load(reinterpret_cast<const T*>(c.address(srcs[s]))[i]));
    const T v = C::store(acc);
    dst[i] = v;
    if (dst2) dst2[i] = v;
  }
}

// Every block polls the awaited flags itself (thread 0), then releases its threads.
__device__ void wait_flag(const Call& c, const DeviceOp& op, bool& first_wait) {
  __shared__ int ok;
  if (threadIdx.x == 0) {
    const ProgramLaunch& p = c.p;
    const auto* flag = reinterpret_cast<const std::uint64_t*>(c.window(op.rank));
    ok = poll(flag, flag_value(c.seq, op.step), op.rank, c.seq, p.timeout_ns, p.control);
    // After the first signal of a peer its call word is this call's (comm/direct.hpp).
    if (ok && first_wait && blockIdx.x == 0) {
      const std::uint64_t theirs =
          *reinterpret_cast<const volatile std::uint64_t*>(c.window(op.rank) + kDirectSignatureOffset);
      if (theirs != p.call_word) record(p.control, DeviceFailure::mismatch, op.rank, c.seq, theirs, p.call_word);
    }
  }
  first_wait = false;
  __syncthreads();
}

template <class T, class Op>
__global__ void program_kernel(ProgramLaunch p) {
  cg::grid_group grid = cg::this_grid();
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::uint64_t seq = *reinterpret_cast<volatile std::uint64_t*>(&p.state->seq) + 1;
  const bool last_synced = *reinterpret_cast<volatile std::uint32_t*>(&p.state->last_synced) != 0;
  const Call c{p, seq, static_cast<unsigned>(seq % p.slots)};
  // The previous program did not make this rank wait for every peer: before
  // writing the slot of two calls ago, see every peer move on from it.
  if (!last_synced && seq > 1 && threadIdx.x == 0) {
    const unsigned prev = static_cast<unsigned>((seq - 1) % p.slots);
    for (int r = 0; r < p.nranks; ++r)
      if (r != p.rank &&
          !poll(reinterpret_cast<const std::uint64_t*>(p.bases[r] + prev * p.slot_bytes), flag_value(seq - 1, 1), r,
                seq, p.timeout_ns, p.control))
        break;
  }
  __syncthreads();
  // Which call this is, for peers to check before they read (comm/direct.hpp); raised with the first signal.
  if (tid == 0) {
    auto* own = c.window(p.rank);
    *reinterpret_cast<volatile std::uint64_t*>(own + kDirectSignatureOffset) = p.call_word;
    *reinterpret_cast<volatile std::uint64_t*>(own + kDirectCallOffset) = seq;
  }
  bool first_wait = true;
  for (std::uint32_t i = 0; i < p.nops; ++i) {
    const DeviceOp op = p.ops[i];
    switch (op.kind) {
      case DeviceOpKind::copy:
        copy_bytes(c.address(op.dst), c.address(p.srcs[op.first_src]), op.bytes, tid, threads);
        break;
      case DeviceOpKind::reduce: reduce_elems<T, Op>(c, op, p.srcs + op.first_src, tid, threads); break;
      case DeviceOpKind::barrier: grid.sync(); break;
      case DeviceOpKind::signal:
        grid.sync();
        if (tid == 0) {
          __threadfence_system();
          store_release(reinterpret_cast<std::uint64_t*>(c.window(p.rank)), flag_value(seq, op.step));
        }
        break;
      case DeviceOpKind::wait: wait_flag(c, op, first_wait); break;
    }
  }
  if (p.avg_elems) {
    grid.sync();
    T* out = reinterpret_cast<T*>(p.output);
    for (std::size_t i = tid; i < p.avg_elems; i += threads) out[i] = device::divide(out[i], p.nranks);
  }
  // Every block has read the call number before any of them gets here.
  grid.sync();
  if (tid == 0) {
    p.state->last_synced = p.synced;
    p.state->seq = seq;
  }
}

constexpr unsigned kThreads = 512;

template <class T, class Op>
cudaError_t launch_typed(const ProgramLaunch& p, unsigned blocks, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, program_kernel<T, Op>, p);
}

template <class Op>
cudaError_t dispatch(const ProgramLaunch& p, DataType t, unsigned blocks, cudaStream_t s) {
  switch (t) {
    case DataType::f32: return launch_typed<float, Op>(p, blocks, s);
    case DataType::f64: return launch_typed<double, Op>(p, blocks, s);
    case DataType::f16: return launch_typed<__half, Op>(p, blocks, s);
    case DataType::bf16: return launch_typed<__nv_bfloat16, Op>(p, blocks, s);
    case DataType::i8: return launch_typed<std::int8_t, Op>(p, blocks, s);
    case DataType::u8: return launch_typed<std::uint8_t, Op>(p, blocks, s);
    case DataType::i32: return launch_typed<std::int32_t, Op>(p, blocks, s);
    case DataType::i64: return launch_typed<std::int64_t, Op>(p, blocks, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_signal(std::uint64_t* flag, std::uint64_t value, cudaStream_t stream) {
  signal_kernel<<<1, 1, 0, stream>>>(flag, value);
  return cudaGetLastError();
}

cudaError_t launch_wait(const FlagWaits& waits, std::uint64_t timeout_ns, const DeviceControlRefs& control,
                        cudaStream_t stream) {
  wait_kernel<<<1, 1, 0, stream>>>(waits, timeout_ns, control);
  return cudaGetLastError();
}

cudaError_t launch_program(const ProgramLaunch& p, DataType dtype, ReduceOp op, unsigned blocks,
                           cudaStream_t stream) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return dispatch<Sum>(p, dtype, blocks, stream);
    case ReduceOp::prod: return dispatch<Prod>(p, dtype, blocks, stream);
    case ReduceOp::min: return dispatch<Min>(p, dtype, blocks, stream);
    case ReduceOp::max: return dispatch<Max>(p, dtype, blocks, stream);
  }
  return cudaErrorInvalidValue;
}

unsigned blocks_for_program(std::size_t bytes, int multiprocessors) {
  // About 64 KiB per block keeps each block's share long enough to hide its barrier.
  constexpr std::size_t kPerBlock = std::size_t{64} << 10;
  const std::size_t want = (bytes + kPerBlock - 1) / kPerBlock;
  const std::size_t cap = multiprocessors > 0 ? static_cast<std::size_t>(multiprocessors) : 1;
  return static_cast<unsigned>(want < 1 ? 1 : (want > cap ? cap : want));
}

}  // namespace comm::cuda_ipc
