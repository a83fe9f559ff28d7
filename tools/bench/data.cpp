#include "data.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace comm::bench {

std::uint16_t to_f16(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t exp = (x >> 23) & 0xffu;
  std::uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<std::uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    std::uint32_t half = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1);
    const std::uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = sign | (static_cast<std::uint32_t>(e) << 10) | (mant >> 13);
  const std::uint32_t rem = mant & 0x1fffu;
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<std::uint16_t>(half);
}

float from_f16(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

std::uint16_t to_bf16(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float from_bf16(std::uint16_t h) noexcept { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

namespace {

// Element codecs: storage type, value -> storage (rounding/wrapping like the
// type does), storage -> value, and how close a float result must be.
template <class T>
struct IntCodec {
  using S = T;
  static S make(double v) { return static_cast<S>(static_cast<std::int64_t>(v)); }
  static double load(S s) { return static_cast<double>(s); }
  static constexpr double tol = 0;
};
struct F32Codec {
  using S = float;
  static S make(double v) { return static_cast<float>(v); }
  static double load(S s) { return s; }
  static constexpr double tol = 1e-6;
};
struct F64Codec {
  using S = double;
  static S make(double v) { return v; }
  static double load(S s) { return s; }
  static constexpr double tol = 1e-12;
};
struct F16Codec {
  using S = std::uint16_t;
  static S make(double v) { return to_f16(static_cast<float>(v)); }
  static double load(S s) { return from_f16(s); }
  static constexpr double tol = 1e-3;
};
struct BF16Codec {
  using S = std::uint16_t;
  static S make(double v) { return to_bf16(static_cast<float>(v)); }
  static double load(S s) { return from_bf16(s); }
  static constexpr double tol = 8e-3;
};

template <class F>
decltype(auto) dispatch(DataType t, F&& f) {
  switch (t) {
    case DataType::f32: return f(F32Codec{});
    case DataType::f64: return f(F64Codec{});
    case DataType::f16: return f(F16Codec{});
    case DataType::bf16: return f(BF16Codec{});
    case DataType::i8: return f(IntCodec<std::int8_t>{});
    case DataType::u8: return f(IntCodec<std::uint8_t>{});
    case DataType::i32: return f(IntCodec<std::int32_t>{});
    case DataType::i64: return f(IntCodec<std::int64_t>{});
  }
  return f(F32Codec{});
}

template <class Codec>
bool matches(double got, double expected) {
  if (Codec::tol == 0) return got == expected;
  if (std::isnan(got) || std::isnan(expected)) return false;
  return std::fabs(got - expected) <= Codec::tol * std::max(1.0, std::fabs(expected));
}

template <class T>
double reduce_int(ReduceOp op, BenchColl c, int nranks, std::size_t index) {
  std::int64_t sum = 0, mn = std::numeric_limits<std::int64_t>::max(), mx = std::numeric_limits<std::int64_t>::min();
  std::uint64_t prod = 1;
  for (int r = 0; r < nranks; ++r) {
    const auto v = static_cast<std::int64_t>(input_value(c, op, r, index));
    sum += v;
    prod *= static_cast<std::uint64_t>(v);
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  switch (op) {
    case ReduceOp::sum: return static_cast<double>(static_cast<T>(sum));
    case ReduceOp::prod: return static_cast<double>(static_cast<T>(prod));
    case ReduceOp::min: return static_cast<double>(static_cast<T>(mn));
    case ReduceOp::max: return static_cast<double>(static_cast<T>(mx));
    case ReduceOp::avg:
      return static_cast<double>(static_cast<T>(static_cast<std::int64_t>(static_cast<T>(sum)) / nranks));
  }
  return 0;
}

template <class Codec>
double reduce_float(ReduceOp op, BenchColl c, int nranks, std::size_t index) {
  double sum = 0, prod = 1, mn = std::numeric_limits<double>::infinity(), mx = -mn;
  for (int r = 0; r < nranks; ++r) {
    const double v = input_value(c, op, r, index);
    sum += v;
    prod *= v;
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  double v = 0;
  switch (op) {
    case ReduceOp::sum: v = sum; break;
    case ReduceOp::prod: v = prod; break;
    case ReduceOp::min: v = mn; break;
    case ReduceOp::max: v = mx; break;
    case ReduceOp::avg: v = sum / nranks; break;
  }
  return Codec::load(Codec::make(v));
}

}  // namespace

double input_value(BenchColl c, ReduceOp op, int rank, std::size_t index) noexcept {
  const auto r = static_cast<std::size_t>(rank);
  if (has_reduce_op(c)) return op == ReduceOp::prod ? 1.0 + static_cast<double>((r + index) % 2)
                                                     : 1.0 + static_cast<double>((3 * r + index) % 5);
  return static_cast<double>((131 * r + index) % 97);
}

void fill_input(void* data, DataType dtype, std::size_t count, BenchColl c, ReduceOp op, int rank, std::size_t first) {
  dispatch(dtype, [&](auto codec) {
    using Codec = decltype(codec);
    auto* p = static_cast<typename Codec::S*>(data);
    for (std::size_t i = 0; i < count; ++i) p[i] = Codec::make(input_value(c, op, rank, first + i));
  });
}

void fill_poison(void* data, DataType dtype, std::size_t count) {
  dispatch(dtype, [&](auto codec) {
    using Codec = decltype(codec);
    using S = typename Codec::S;
    S poison{};
    if constexpr (Codec::tol == 0) poison = std::numeric_limits<S>::max();
    else poison = Codec::make(std::numeric_limits<double>::quiet_NaN());
    std::fill_n(static_cast<S*>(data), count, poison);
  });
}

double expected_reduction(BenchColl c, DataType dtype, ReduceOp op, int nranks, std::size_t index) {
  return dispatch(dtype, [&](auto codec) -> double {
    using Codec = decltype(codec);
    if constexpr (Codec::tol == 0) return reduce_int<typename Codec::S>(op, c, nranks, index);
    else return reduce_float<Codec>(op, c, nranks, index);
  });
}

std::size_t count_wrong(const void* out, const CheckArgs& a) {
  return dispatch(a.dtype, [&](auto codec) -> std::size_t {
    using Codec = decltype(codec);
    const auto* p = static_cast<const typename Codec::S*>(out);
    const std::size_t n = static_cast<std::size_t>(a.nranks);
    const std::size_t b = a.block;
    auto moved = [&](int from, std::size_t index) {
      return Codec::load(Codec::make(input_value(a.coll, a.op, from, index)));
    };
    std::size_t wrong = 0;
    auto check = [&](std::size_t i, double expected) {
      if (!matches<Codec>(Codec::load(p[i]), expected)) ++wrong;
    };
    switch (a.coll) {
      case BenchColl::allreduce:
        for (std::size_t i = 0; i < b; ++i) check(i, expected_reduction(a.coll, a.dtype, a.op, a.nranks, i));
        break;
      case BenchColl::reduce:
        if (a.rank == a.root)
          for (std::size_t i = 0; i < b; ++i) check(i, expected_reduction(a.coll, a.dtype, a.op, a.nranks, i));
        break;
      case BenchColl::reduce_scatter:
        for (std::size_t i = 0; i < b; ++i)
          check(i, expected_reduction(a.coll, a.dtype, a.op, a.nranks, static_cast<std::size_t>(a.rank) * b + i));
        break;
      case BenchColl::allgather:
        for (std::size_t s = 0; s < n; ++s)
          for (std::size_t i = 0; i < b; ++i) check(s * b + i, moved(static_cast<int>(s), i));
        break;
      case BenchColl::broadcast:
        for (std::size_t i = 0; i < b; ++i) check(i, moved(a.root, i));
        break;
      case BenchColl::alltoall:
        for (std::size_t j = 0; j < n; ++j)
          for (std::size_t k = 0; k < b; ++k)
            check(j * b + k, moved(static_cast<int>(j), static_cast<std::size_t>(a.rank) * b + k));
        break;
      case BenchColl::sendrecv:
        if (a.rank <= 1)
          for (std::size_t i = 0; i < b; ++i) check(i, moved(1 - a.rank, i));
        break;
    }
    return wrong;
  });
}

}  // namespace comm::bench
