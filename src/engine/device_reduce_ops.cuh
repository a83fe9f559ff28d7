#pragma once
// Elementwise reduction operators for device code (nvcc only), shared by the
// NCCL stream engine's kernels and the CUDA-IPC direct-memory kernels so both
// combine exactly like the host kernels: the same comparisons for min/max (ties
// and NaN), integer sum/prod in unsigned arithmetic (defined wrap-around),
// f16/bf16 combined in f32 and rounded to nearest even on store, and avg's
// division (floating: true division; integers: truncation toward zero).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace comm::device {

struct Sum { template <class T> __device__ static T apply(T a, T b) { return static_cast<T>(a + b); } };
struct Prod { template <class T> __device__ static T apply(T a, T b) { return static_cast<T>(a * b); } };
struct Min { template <class T> __device__ static T apply(T a, T b) { return b < a ? b : a; } };
struct Max { template <class T> __device__ static T apply(T a, T b) { return a < b ? b : a; } };

template <class T, bool Wraps>
struct Arith { using type = T; };
template <class T>
struct Arith<T, true> { using type = std::make_unsigned_t<T>; };

// Storage type -> the type the operator computes in, with load/store between them.
template <class T, class Op>
struct Compute {
  using type =
      typename Arith<T, std::is_integral_v<T> && (std::is_same_v<Op, Sum> || std::is_same_v<Op, Prod>)>::type;
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

// v / n as avg finishes it.
template <class T>
__device__ T divide(T v, int n) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(__half2float(v) / static_cast<float>(n));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(__bfloat162float(v) / static_cast<float>(n));
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<long long>(v) / n);
  else return v / static_cast<T>(n);
}

}  // namespace comm::device
