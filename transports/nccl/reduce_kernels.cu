#include "reduce_kernels.hpp"

#include "engine/device_reduce_ops.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace comm::nccl {
namespace {

using device::Compute;
using device::Max;
using device::Min;
using device::Prod;
using device::Sum;

// A grid-stride loop: one launch covers any count with a bounded grid, and
// each thread reads its element of a and b before writing dst, so exact
// aliasing of dst with a or b is safe.
template <class T, class Op>
__global__ void reduce_kernel(T* dst, const T* a, const T* b, std::size_t n) {
  using C = Compute<T, Op>;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = C::store(Op::apply(C::load(a[i]), C::load(b[i])));
}

template <class T>
__global__ void divide_kernel(T* p, std::size_t n, int k) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    p[i] = device::divide(p[i], k);
  }
}

constexpr unsigned kThreads = 256;
// Enough blocks to fill any current GPU several times over; beyond that the
// grid-stride loop does the rest.
constexpr std::size_t kMaxBlocks = 4096;

unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

template <class T, class Op>
cudaError_t launch_typed(void* dst, const void* a, const void* b, std::size_t n, cudaStream_t s) {
  reduce_kernel<T, Op><<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(dst), static_cast<const T*>(a),
                                                          static_cast<const T*>(b), n);
  return cudaGetLastError();
}

template <class Op>
cudaError_t dispatch(void* dst, const void* a, const void* b, std::size_t n, DataType t, cudaStream_t s) {
  switch (t) {
    case DataType::f32: return launch_typed<float, Op>(dst, a, b, n, s);
    case DataType::f64: return launch_typed<double, Op>(dst, a, b, n, s);
    case DataType::f16: return launch_typed<__half, Op>(dst, a, b, n, s);
    case DataType::bf16: return launch_typed<__nv_bfloat16, Op>(dst, a, b, n, s);
    case DataType::i8: return launch_typed<std::int8_t, Op>(dst, a, b, n, s);
    case DataType::u8: return launch_typed<std::uint8_t, Op>(dst, a, b, n, s);
    case DataType::i32: return launch_typed<std::int32_t, Op>(dst, a, b, n, s);
    case DataType::i64: return launch_typed<std::int64_t, Op>(dst, a, b, n, s);
  }
  return cudaErrorInvalidValue;
}

template <class T>
cudaError_t divide_typed(void* p, std::size_t n, int k, cudaStream_t s) {
  divide_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(p), n, k);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                          ReduceOp op, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return dispatch<Sum>(dst, a, b, count, dtype, stream);
    case ReduceOp::prod: return dispatch<Prod>(dst, a, b, count, dtype, stream);
    case ReduceOp::min: return dispatch<Min>(dst, a, b, count, dtype, stream);
    case ReduceOp::max: return dispatch<Max>(dst, a, b, count, dtype, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_divide(void* data, std::size_t count, DataType dtype, int divisor, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  switch (dtype) {
    case DataType::f32: return divide_typed<float>(data, count, divisor, stream);
    case DataType::f64: return divide_typed<double>(data, count, divisor, stream);
    case DataType::f16: return divide_typed<__half>(data, count, divisor, stream);
    case DataType::bf16: return divide_typed<__nv_bfloat16>(data, count, divisor, stream);
    case DataType::i8: return divide_typed<std::int8_t>(data, count, divisor, stream);
    case DataType::u8: return divide_typed<std::uint8_t>(data, count, divisor, stream);
    case DataType::i32: return divide_typed<std::int32_t>(data, count, divisor, stream);
    case DataType::i64: return divide_typed<std::int64_t>(data, count, divisor, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace comm::nccl
