#include "reduce_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace comm::nccl {
namespace {

struct Sum { template <class T> __device__ static T apply(T a, T b) { return static_cast<T>(a + b); } };
struct Prod { template <class T> __device__ static T apply(T a, T b) { return static_cast<T>(a * b); } };
// Same comparison as the host kernels so both paths agree on ties and NaN.
struct Min { template <class T> __device__ static T apply(T a, T b) { return b < a ? b : a; } };
struct Max { template <class T> __device__ static T apply(T a, T b) { return a < b ? b : a; } };

// Storage type -> the type the operator computes in. Integer sum/prod run
// unsigned so the documented wrap-around is defined behaviour.
template <class T, bool Wraps>
struct Arith { using type = T; };
template <class T>
struct Arith<T, true> { using type = std::make_unsigned_t<T>; };

template <class T, class Op>
struct Compute {
  using type = typename Arith<T, std::is_integral_v<T> && (std::is_same_v<Op, Sum> || std::is_same_v<Op, Prod>)>::type;
  __device__ static type load(T v) { return static_cast<type>(v); }
  __device__ static T store(type v) { return static_cast<T>(v); }
};
template <class Op>
struct Compute<__half, Op> {
  using type = float;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <class Op>
struct Compute<__nv_bfloat16, Op> {
  using type = float;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

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
    if constexpr (std::is_same_v<T, __half>) {
      p[i] = __float2half_rn(__half2float(p[i]) / static_cast<float>(k));
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      p[i] = __float2bfloat16_rn(__bfloat162float(p[i]) / static_cast<float>(k));
    } else if constexpr (std::is_integral_v<T>) {
      // C++ integer division truncates toward zero, as the core defines avg.
      p[i] = static_cast<T>(static_cast<long long>(p[i]) / k);
    } else {
      p[i] = p[i] / static_cast<T>(k);
    }
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
