#pragma once
// Inputs and expected results of the multi-process suite. Rank r's element i
// is a small integer f(r, i), chosen so that every partial sum and product is
// exact in every dtype (bf16 included): results do not depend on the order in
// which an algorithm reduces, and each rank computes the expected output on
// its own.

#include <comm/types.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace suite {

using comm::DataType;
using comm::ReduceOp;

inline bool is_unsigned(DataType t) { return t == DataType::u8; }

/// f(rank, index): in [-8, 8] ([0, 16] for unsigned) for sum/min/max/avg;
/// 1, -1 or 2 for prod (a bounded product: at most ranks/5 twos meet).
inline double input_value(int rank, std::size_t index, DataType t, ReduceOp op) {
  const auto r = static_cast<std::size_t>(rank);
  if (op == ReduceOp::prod) {
    if ((r + index) % 5 == 0) return 2;
    return (!is_unsigned(t) && (r + 2 * index) % 3 == 0) ? -1 : 1;
  }
  const double v = static_cast<double>((r * 7 + index * 13) % 17);
  return is_unsigned(t) ? v : v - 8;
}

inline std::uint16_t float_to_bf16(float f) {
  const auto x = std::bit_cast<std::uint32_t>(f);
  return static_cast<std::uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}
inline float bf16_to_float(std::uint16_t h) { return std::bit_cast<float>(std::uint32_t{h} << 16); }

inline std::uint16_t float_to_f16(float f) {
  const auto x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000);
  const float a = std::fabs(f);
  if (a == 0) return sign;
  if (a < 6.103515625e-05f)  // below the smallest normal: a multiple of 2^-24
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(a * 16777216.0f)));
  int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  std::uint32_t m = (x & 0x7fffff) >> 13;
  const std::uint32_t rem = x & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (m & 1))) ++m;
  if (m == 0x400) {
    m = 0;
    ++exp;
  }
  if (exp >= 31) return static_cast<std::uint16_t>(sign | 0x7c00);
  return static_cast<std::uint16_t>(sign | (exp << 10) | m);
}
inline float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  const int exp = (h >> 10) & 0x1f;
  const std::uint32_t m = h & 0x3ff;
  if (exp == 0) return std::bit_cast<float>(sign) + (sign ? -1.f : 1.f) * static_cast<float>(m) / 16777216.0f;
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000 | (m << 13));
  return std::bit_cast<float>(sign | static_cast<std::uint32_t>(exp - 15 + 127) << 23 | (m << 13));
}

/// A typed host buffer addressed by element, converting to and from double.
class Buffer {
 public:
  Buffer(DataType t, std::size_t count) : t_(t), count_(count), bytes_(std::max<std::size_t>(1, count * comm::dtype_size(t))) {}

  void* data() { return bytes_.data(); }
  void* at(std::size_t i) { return bytes_.data() + i * comm::dtype_size(t_); }  ///< element i's address
  std::size_t count() const { return count_; }
  DataType dtype() const { return t_; }

  void set(std::size_t i, double v) {
    unsigned char* p = bytes_.data() + i * comm::dtype_size(t_);
    switch (t_) {
      case DataType::f32: store(p, static_cast<float>(v)); break;
      case DataType::f64: store(p, v); break;
      case DataType::f16: store(p, float_to_f16(static_cast<float>(v))); break;
      case DataType::bf16: store(p, float_to_bf16(static_cast<float>(v))); break;
      case DataType::i8: store(p, static_cast<std::int8_t>(static_cast<std::int64_t>(v))); break;
      case DataType::u8: store(p, static_cast<std::uint8_t>(static_cast<std::int64_t>(v))); break;
      case DataType::i32: store(p, static_cast<std::int32_t>(static_cast<std::int64_t>(v))); break;
      case DataType::i64: store(p, static_cast<std::int64_t>(v)); break;
    }
  }

  double get(std::size_t i) const {
    const unsigned char* p = bytes_.data() + i * comm::dtype_size(t_);
    switch (t_) {
      case DataType::f32: return load<float>(p);
      case DataType::f64: return load<double>(p);
      case DataType::f16: return f16_to_float(load<std::uint16_t>(p));
      case DataType::bf16: return bf16_to_float(load<std::uint16_t>(p));
      case DataType::i8: return load<std::int8_t>(p);
      case DataType::u8: return load<std::uint8_t>(p);
      case DataType::i32: return load<std::int32_t>(p);
      case DataType::i64: return static_cast<double>(load<std::int64_t>(p));
    }
    return 0;
  }

 private:
  template <class T>
  static void store(unsigned char* p, T v) { std::memcpy(p, &v, sizeof v); }
  template <class T>
  static T load(const unsigned char* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  DataType t_;
  std::size_t count_;
  std::vector<unsigned char> bytes_;
};

/// Wraps an integer result into the dtype's range, as the kernels' wrapping
/// arithmetic does (sum and prod are exact modulo 2^bits).
inline double wrap(DataType t, long long v) {
  switch (t) {
    case DataType::i8: return static_cast<std::int8_t>(v);
    case DataType::u8: return static_cast<std::uint8_t>(v);
    case DataType::i32: return static_cast<std::int32_t>(v);
    case DataType::i64: return static_cast<double>(v);
    case DataType::f32:
    case DataType::f64:
    case DataType::f16:
    case DataType::bf16: return static_cast<double>(v);
  }
  return static_cast<double>(v);
}

/// The reduction over ranks 0..n-1 of input_value(q, index).
inline double expected_reduction(int n, std::size_t index, DataType t, ReduceOp op) {
  long long acc = static_cast<long long>(input_value(0, index, t, op));
  for (int q = 1; q < n; ++q) {
    const auto v = static_cast<long long>(input_value(q, index, t, op));
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc += v; break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::min: acc = std::min(acc, v); break;
      case ReduceOp::max: acc = std::max(acc, v); break;
    }
  }
  if (op != ReduceOp::avg) return wrap(t, acc);
  if (comm::is_floating(t)) return static_cast<double>(acc) / n;
  // Integer avg: the wrapped sum divided by n, truncating toward zero.
  return static_cast<double>(static_cast<long long>(wrap(t, acc)) / n);
}

/// True if `got` is `want` up to the dtype's rounding (exact for integers).
inline bool close_enough(DataType t, double got, double want) {
  double rel = 0;
  switch (t) {
    case DataType::f32: rel = 1e-6; break;
    case DataType::f64: rel = 1e-12; break;
    case DataType::f16: rel = 2e-3; break;
    case DataType::bf16: rel = 1.6e-2; break;
    case DataType::i8:
    case DataType::u8:
    case DataType::i32:
    case DataType::i64: return got == want;
  }
  return std::fabs(got - want) <= rel * std::max(1.0, std::fabs(want));
}

}  // namespace suite
