#pragma once
// Helpers shared by the NCCL test programs: the skip protocol (print the
// reason, exit 77, which ctest reports as SKIPPED), device buffers, and host
// reference values for every DataType.

#include <comm/types.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace comm::test {

inline constexpr int kSkip = 77;

// Number of CUDA devices, or -1 with `why` set when none can be used.
inline int cuda_devices(std::string& why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    why = std::string("no CUDA device: cudaGetDeviceCount returned ") + cudaGetErrorName(e) + " (" +
          cudaGetErrorString(e) + ")";
    return -1;
  }
  if (n == 0) {
    why = "no CUDA device: cudaGetDeviceCount returned 0 devices";
    return -1;
  }
  return n;
}

inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Owning device buffer of raw bytes.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    cuda_ok(cudaMalloc(&p_, bytes ? bytes : 1), "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const noexcept { return p_; }
  std::size_t bytes() const noexcept { return bytes_; }
  void upload(const std::vector<std::byte>& host) {
    cuda_ok(cudaMemcpy(p_, host.data(), host.size(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    // From pageable memory cudaMemcpy may return before the DMA landed, and
    // work on non-blocking streams does not wait for the legacy stream.
    cuda_ok(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize(legacy)");
  }
  std::vector<std::byte> download() const {
    std::vector<std::byte> host(bytes_);
    cuda_ok(cudaMemcpy(host.data(), p_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return host;
  }

 private:
  void* p_ = nullptr;
  std::size_t bytes_;
};

// Element i of a typed byte array as a double, and back. Values used by the
// tests are small integers, exact in every type (f16 and bf16 included).
inline double get(const std::vector<std::byte>& v, DataType t, std::size_t i) {
  const std::byte* p = v.data() + i * dtype_size(t);
  switch (t) {
    case DataType::f32: { float x; std::memcpy(&x, p, 4); return x; }
    case DataType::f64: { double x; std::memcpy(&x, p, 8); return x; }
    case DataType::f16: { __half x; std::memcpy(&x, p, 2); return __half2float(x); }
    case DataType::bf16: { __nv_bfloat16 x; std::memcpy(&x, p, 2); return __bfloat162float(x); }
    case DataType::i8: { std::int8_t x; std::memcpy(&x, p, 1); return x; }
    case DataType::u8: { std::uint8_t x; std::memcpy(&x, p, 1); return x; }
    case DataType::i32: { std::int32_t x; std::memcpy(&x, p, 4); return x; }
    case DataType::i64: { std::int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
  }
  return 0;
}

inline void put(std::vector<std::byte>& v, DataType t, std::size_t i, double x) {
  std::byte* p = v.data() + i * dtype_size(t);
  switch (t) {
    case DataType::f32: { float y = static_cast<float>(x); std::memcpy(p, &y, 4); return; }
    case DataType::f64: { std::memcpy(p, &x, 8); return; }
    case DataType::f16: { __half y = __float2half_rn(static_cast<float>(x)); std::memcpy(p, &y, 2); return; }
    case DataType::bf16: { __nv_bfloat16 y = __float2bfloat16_rn(static_cast<float>(x)); std::memcpy(p, &y, 2); return; }
    case DataType::i8: { auto y = static_cast<std::int8_t>(x); std::memcpy(p, &y, 1); return; }
    case DataType::u8: { auto y = static_cast<std::uint8_t>(x); std::memcpy(p, &y, 1); return; }
    case DataType::i32: { auto y = static_cast<std::int32_t>(x); std::memcpy(p, &y, 4); return; }
    case DataType::i64: { auto y = static_cast<std::int64_t>(x); std::memcpy(p, &y, 8); return; }
  }
}

// Host reference of a op b on small exact values; avg divides by `n`
// (floating: true division, integers: truncation toward zero).
inline double reference(double a, double b, ReduceOp op, DataType t, int n) {
  switch (op) {
    case ReduceOp::sum: return a + b;
    case ReduceOp::prod: return a * b;
    case ReduceOp::min: return b < a ? b : a;
    case ReduceOp::max: return a < b ? b : a;
    case ReduceOp::avg: return is_floating(t) ? (a + b) / n : std::trunc((a + b) / n);
  }
  return 0;
}

// Tolerance of a result computed in type t from exact inputs.
inline double tolerance(DataType t, double expected) {
  switch (t) {
    case DataType::f16: return 1e-3 * std::fabs(expected) + 1e-3;
    case DataType::bf16: return 8e-3 * std::fabs(expected) + 8e-3;
    case DataType::f32: return 1e-6 * std::fabs(expected) + 1e-6;
    case DataType::f64:
    case DataType::i8:
    case DataType::u8:
    case DataType::i32:
    case DataType::i64: return 1e-12;
  }
  return 0;
}

}  // namespace comm::test
