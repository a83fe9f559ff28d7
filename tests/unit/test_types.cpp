// Enum names, dtype sizes, half-precision conversions and the host reduction
// kernels for every dtype x op, against references computed here.

#include "engine/reduce_kernels.hpp"

#include <comm/comm.hpp>
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using namespace comm;

TEST_CASE("every enum value has a distinct name that parses back") {
  std::set<std::string> names;
  // Every value of `all` has a name no other value of its enum has, and `parse` reads it back.
  const auto distinct_and_parsed = [&names](const auto& all, auto parse) {
    names.clear();
    for (auto v : all) {
      CHECK(names.insert(std::string(to_string(v))).second);
      CHECK(parse(to_string(v)) == v);
    }
  };
  distinct_and_parsed(kAllDataTypes, parse_dtype);
  distinct_and_parsed(kAllReduceOps, parse_reduce_op);
  distinct_and_parsed(kAllCollectives, parse_collective);
  distinct_and_parsed(kAllLinkKinds, parse_link_kind);
  for (MemoryKind m : {MemoryKind::host, MemoryKind::cuda}) CHECK(!to_string(m).empty());
  names.clear();
  for (ErrorCode e : {ErrorCode::invalid_argument, ErrorCode::unsupported, ErrorCode::unknown_algorithm,
                      ErrorCode::unknown_transport, ErrorCode::invalid_config, ErrorCode::timeout,
                      ErrorCode::peer_failed, ErrorCode::aborted, ErrorCode::mismatch,
                      ErrorCode::transport_failure, ErrorCode::communicator_failed, ErrorCode::store_failure,
                      ErrorCode::internal})
    CHECK(names.insert(std::string(to_string(e))).second);
  CHECK(is_usage_error(ErrorCode::unknown_algorithm));
  CHECK_FALSE(is_usage_error(ErrorCode::peer_failed));
}

TEST_CASE("aliases and unknown names") {
  CHECK(parse_dtype("float") == DataType::f32);
  CHECK(parse_dtype("bfloat16") == DataType::bf16);
  CHECK(parse_collective("alltoall") == Collective::all_to_all);
  try {
    parse_dtype("f17");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).find("f17") != std::string::npos);
    CHECK(std::string(e.what()).find("bf16") != std::string::npos);  // lists the valid names
  }
}

TEST_CASE("dtype sizes") {
  CHECK(dtype_size(DataType::f32) == 4);
  CHECK(dtype_size(DataType::f64) == 8);
  CHECK(dtype_size(DataType::f16) == 2);
  CHECK(dtype_size(DataType::bf16) == 2);
  CHECK(dtype_size(DataType::i8) == 1);
  CHECK(dtype_size(DataType::u8) == 1);
  CHECK(dtype_size(DataType::i32) == 4);
  CHECK(dtype_size(DataType::i64) == 8);
}

TEST_CASE("half-precision conversions round trip exactly representable values") {
  // Every f16 bit pattern that is not NaN converts to f32 and back unchanged.
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const bool nan = (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff);
    if (nan) continue;
    REQUIRE(kernels::f32_to_f16(kernels::f16_to_f32(bits)) == bits);
  }
  CHECK(kernels::f16_to_f32(0x3c00) == 1.0f);
  CHECK(kernels::f16_to_f32(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(kernels::f32_to_f16(65520.0f) == 0x7c00);                // rounds to infinity
  CHECK(kernels::f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // tie to even
  for (std::uint32_t h = 0; h < 0x10000; h += 7) {
    const auto bits = static_cast<std::uint16_t>(h);
    if ((bits & 0x7f80) == 0x7f80 && (bits & 0x7f)) continue;
    REQUIRE(kernels::f32_to_bf16(kernels::bf16_to_f32(bits)) == bits);
  }
  CHECK(kernels::bf16_to_f32(0x3f80) == 1.0f);
  CHECK(kernels::f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);  // tie to even
}

namespace {

template <class T>
T apply(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return static_cast<T>(a + b);
    case ReduceOp::prod: return static_cast<T>(a * b);
    case ReduceOp::min: return std::min(a, b);
    case ReduceOp::max: return std::max(a, b);
  }
  return a;
}

template <class T>
void check_kernel(DataType t) {
  for (ReduceOp op : kAllReduceOps) {
    const std::size_t n = 1037;  // odd: exercises vector tails
    std::vector<T> a(n), b(n), d(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = static_cast<T>(static_cast<int>(i % 11) - 5);
      b[i] = static_cast<T>(static_cast<int>(i % 7) - 3);
    }
    kernels::reduce(d.data(), a.data(), b.data(), n, t, op);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(d[i] == apply(op, a[i], b[i]));
    kernels::reduce(a.data(), a.data(), b.data(), n, t, op);  // in place
    for (std::size_t i = 0; i < n; ++i) REQUIRE(a[i] == d[i]);
  }
}

template <float (*ToF)(std::uint16_t) noexcept, std::uint16_t (*FromF)(float) noexcept>
void check_half_kernel(DataType t) {
  for (ReduceOp op : kAllReduceOps) {
    const std::size_t n = 300;
    std::vector<std::uint16_t> a(n), b(n), d(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = FromF(0.25f * static_cast<float>(static_cast<int>(i % 13) - 6));
      b[i] = FromF(0.5f * static_cast<float>(static_cast<int>(i % 5) - 2));
    }
    kernels::reduce(d.data(), a.data(), b.data(), n, t, op);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(d[i] == FromF(apply(op, ToF(a[i]), ToF(b[i]))));
  }
}

}  // namespace

TEST_CASE("reduction kernels: every dtype x op") {
  check_kernel<float>(DataType::f32);
  check_kernel<double>(DataType::f64);
  check_kernel<std::int8_t>(DataType::i8);
  check_kernel<std::int32_t>(DataType::i32);
  check_kernel<std::int64_t>(DataType::i64);
  check_half_kernel<kernels::f16_to_f32, kernels::f32_to_f16>(DataType::f16);
  check_half_kernel<kernels::bf16_to_f32, kernels::f32_to_bf16>(DataType::bf16);
  // u8 separately: values must stay non-negative.
  std::vector<std::uint8_t> a{200, 3, 17}, b{100, 250, 17}, d(3);
  kernels::reduce(d.data(), a.data(), b.data(), 3, DataType::u8, ReduceOp::sum);
  CHECK(d == std::vector<std::uint8_t>{44, 253, 34});  // wraps modulo 256
  kernels::reduce(d.data(), a.data(), b.data(), 3, DataType::u8, ReduceOp::min);
  CHECK(d == std::vector<std::uint8_t>{100, 3, 17});
}

TEST_CASE("avg finishes with a division: truncation toward zero for integers") {
  std::vector<std::int32_t> v{7, -7, 9, 0};
  kernels::finish_avg(v.data(), v.size(), DataType::i32, 2);
  CHECK(v == std::vector<std::int32_t>{3, -3, 4, 0});
  std::vector<float> f{1.0f, -3.0f};
  kernels::finish_avg(f.data(), f.size(), DataType::f32, 4);
  CHECK(f == std::vector<float>{0.25f, -0.75f});
  std::vector<std::uint16_t> h{kernels::f32_to_bf16(3.0f)};
  kernels::finish_avg(h.data(), 1, DataType::bf16, 2);
  CHECK(kernels::bf16_to_f32(h[0]) == 1.5f);
}
