#include "engine/reduce_kernels.hpp"

#include <algorithm>
#include <bit>
#include <type_traits>

namespace comm::kernels {

float bf16_to_f32(std::uint16_t h) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

std::uint16_t f32_to_bf16(float f) noexcept {
  auto bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu))  // NaN stays NaN
    return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<std::uint16_t>(bits >> 16);
}

float f16_to_f32(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | ((127 - 15 - static_cast<std::uint32_t>(e)) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

std::uint16_t f32_to_f16(float f) noexcept {
  const auto bits = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal or zero in f16
    if (abs < 0x33000000u) return sign;
    const std::uint32_t exp = abs >> 23;
    const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exp;  // 14..24
    std::uint32_t half = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1);
    const std::uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u) - (static_cast<std::uint32_t>(127 - 15) << 23);
  return static_cast<std::uint16_t>(sign | (r >> 13));
}

namespace {

struct Sum { template <class T> static T apply(T a, T b) { return static_cast<T>(a + b); } };
struct Prod { template <class T> static T apply(T a, T b) { return static_cast<T>(a * b); } };
struct Min { template <class T> static T apply(T a, T b) { return b < a ? b : a; } };
struct Max { template <class T> static T apply(T a, T b) { return a < b ? b : a; } };

template <class T>
using Unsigned = std::make_unsigned_t<T>;

template <class Op, class T>
void loop(T* __restrict d, const T* __restrict a, const T* __restrict b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = Op::apply(a[i], b[i]);
}

// Aliasing: dst may equal a or b exactly. A restrict loop would then be UB,
// so the aliasing case takes a plain loop (still vectorised: same index).
template <class Op, class T>
void loop_alias(T* d, const T* a, const T* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = Op::apply(a[i], b[i]);
}

template <class Op, class T>
void typed_exact(T* d, const T* x, const T* y, std::size_t n) {
  if (d == x || d == y)
    loop_alias<Op>(d, x, y, n);
  else
    loop<Op>(d, x, y, n);
}

template <class Op, class T>
void typed(void* dst, const void* a, const void* b, std::size_t n) {
  // Integer sum/prod wrap modulo 2^bits as documented; compute them unsigned
  // so the wrap is defined behaviour.
  if constexpr (std::is_integral_v<T> && (std::is_same_v<Op, Sum> || std::is_same_v<Op, Prod>)) {
    using U = Unsigned<T>;
    typed_exact<Op>(static_cast<U*>(dst), static_cast<const U*>(a), static_cast<const U*>(b), n);
  } else {
    typed_exact<Op>(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), n);
  }
}

template <class Op, float (*ToF)(std::uint16_t) noexcept, std::uint16_t (*FromF)(float) noexcept>
void half_typed(void* dst, const void* a, const void* b, std::size_t n) {
  auto* d = static_cast<std::uint16_t*>(dst);
  auto* x = static_cast<const std::uint16_t*>(a);
  auto* y = static_cast<const std::uint16_t*>(b);
  // Blocked through an f32 buffer so the conversions and the op vectorise separately.
  constexpr std::size_t kBlock = 256;
  float fx[kBlock], fy[kBlock];
  for (std::size_t i = 0; i < n; i += kBlock) {
    const std::size_t m = std::min(kBlock, n - i);
    for (std::size_t j = 0; j < m; ++j) fx[j] = ToF(x[i + j]);
    for (std::size_t j = 0; j < m; ++j) fy[j] = ToF(y[i + j]);
    for (std::size_t j = 0; j < m; ++j) fx[j] = Op::apply(fx[j], fy[j]);
    for (std::size_t j = 0; j < m; ++j) d[i + j] = FromF(fx[j]);
  }
}

template <class Op>
void dispatch(void* dst, const void* a, const void* b, std::size_t n, DataType t) {
  switch (t) {
    case DataType::f32: return typed<Op, float>(dst, a, b, n);
    case DataType::f64: return typed<Op, double>(dst, a, b, n);
    case DataType::f16: return half_typed<Op, f16_to_f32, f32_to_f16>(dst, a, b, n);
    case DataType::bf16: return half_typed<Op, bf16_to_f32, f32_to_bf16>(dst, a, b, n);
    case DataType::i8: return typed<Op, std::int8_t>(dst, a, b, n);
    case DataType::u8: return typed<Op, std::uint8_t>(dst, a, b, n);
    case DataType::i32: return typed<Op, std::int32_t>(dst, a, b, n);
    case DataType::i64: return typed<Op, std::int64_t>(dst, a, b, n);
  }
}

template <class T>
void divide(T* p, std::size_t n, int k) {
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(k));
}

template <float (*ToF)(std::uint16_t) noexcept, std::uint16_t (*FromF)(float) noexcept>
void divide_half(std::uint16_t* p, std::size_t n, int k) {
  const float inv = static_cast<float>(k);
  for (std::size_t i = 0; i < n; ++i) p[i] = FromF(ToF(p[i]) / inv);
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dtype, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return dispatch<Sum>(dst, a, b, count, dtype);
    case ReduceOp::prod: return dispatch<Prod>(dst, a, b, count, dtype);
    case ReduceOp::min: return dispatch<Min>(dst, a, b, count, dtype);
    case ReduceOp::max: return dispatch<Max>(dst, a, b, count, dtype);
  }
}

void finish_avg(void* data, std::size_t count, DataType dtype, int nranks) {
  switch (dtype) {
    case DataType::f32: return divide(static_cast<float*>(data), count, nranks);
    case DataType::f64: return divide(static_cast<double*>(data), count, nranks);
    case DataType::f16: return divide_half<f16_to_f32, f32_to_f16>(static_cast<std::uint16_t*>(data), count, nranks);
    case DataType::bf16: return divide_half<bf16_to_f32, f32_to_bf16>(static_cast<std::uint16_t*>(data), count, nranks);
    case DataType::i8: return divide(static_cast<std::int8_t*>(data), count, nranks);
    case DataType::u8: return divide(static_cast<std::uint8_t*>(data), count, nranks);
    case DataType::i32: return divide(static_cast<std::int32_t*>(data), count, nranks);
    case DataType::i64: return divide(static_cast<std::int64_t*>(data), count, nranks);
  }
}

}  // namespace comm::kernels
