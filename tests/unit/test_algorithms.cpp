// Every algorithm through the real Communicator API over the `local`
// transport: each one forced by CallOptions::algorithm, with an 8-byte
// Config::chunk_bytes so every pipelined path runs many chunks, over world
// sizes 1-9, 13 and 16 (sampled), element counts 0, 1, 7, n-1, n+1 and 1001,
// every dtype x op for the reductions (a sample of dtypes for the
// collectives that only move data), in place and out of place.
// References are computed here, in double, from the same generator.

#include "sweep_sizes.hpp"
#include "local_group.hpp"

#include "algorithms/algorithm.hpp"

#include <comm/comm.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using namespace comm;
using comm::test::run_local;
using namespace std::chrono_literals;

namespace {

// ---- element access (16-bit floats via their bit patterns) -----------------

float f16_bits_to_float(std::uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v = exp == 0 ? std::ldexp(static_cast<float>(man), -24)
                     : std::ldexp(static_cast<float>(man | 0x400), exp - 25);
  return sign ? -v : v;
}
// Exact for the small integers and halves this test stores.
std::uint16_t float_to_f16_bits(float f) {
  if (f == 0) return std::signbit(f) ? 0x8000 : 0;
  const std::uint16_t sign = f < 0 ? 0x8000 : 0;
  int e = 0;
  const float m = std::frexp(std::fabs(f), &e);  // |f| = m * 2^e, m in [0.5, 1)
  const auto man = static_cast<std::uint16_t>(std::lround((m * 2 - 1) * 1024));
  return static_cast<std::uint16_t>(sign | ((e - 1 + 15) << 10) | man);
}
float bf16_bits_to_float(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }
std::uint16_t float_to_bf16_bits(float f) { return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(f) >> 16); }

double get(DataType t, const std::vector<std::uint8_t>& buf, std::size_t i) {
  const std::uint8_t* p = buf.data() + i * dtype_size(t);
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (t) {
    case DataType::f32: return load(float{});
    case DataType::f64: return load(double{});
    case DataType::f16: return f16_bits_to_float(load(std::uint16_t{}));
    case DataType::bf16: return bf16_bits_to_float(load(std::uint16_t{}));
    case DataType::i8: return load(std::int8_t{});
    case DataType::u8: return load(std::uint8_t{});
    case DataType::i32: return load(std::int32_t{});
    case DataType::i64: return static_cast<double>(load(std::int64_t{}));
  }
  return 0;
}

void set(DataType t, std::vector<std::uint8_t>& buf, std::size_t i, double v) {
  std::uint8_t* p = buf.data() + i * dtype_size(t);
  auto store = [p](auto x) { std::memcpy(p, &x, sizeof x); };
  switch (t) {
    case DataType::f32: store(static_cast<float>(v)); break;
    case DataType::f64: store(v); break;
    case DataType::f16: store(float_to_f16_bits(static_cast<float>(v))); break;
    case DataType::bf16: store(float_to_bf16_bits(static_cast<float>(v))); break;
    case DataType::i8: store(static_cast<std::int8_t>(v)); break;
    case DataType::u8: store(static_cast<std::uint8_t>(v)); break;
    case DataType::i32: store(static_cast<std::int32_t>(v)); break;
    case DataType::i64: store(static_cast<std::int64_t>(v)); break;
  }
}

bool is_unsigned(DataType t) { return t == DataType::u8; }

// Input of rank r, element i, chosen so every op's exact result fits every
// dtype (|sum| <= 2 * 16, products are +-2 or 1).
double input_value(DataType t, ReduceOp op, int r, std::size_t i, int n) {
  const auto ii = static_cast<long long>(i);
  switch (op) {
    case ReduceOp::prod:
      if (static_cast<int>((ii + r) % n) != 0) return 1;
      return is_unsigned(t) || ii % 2 ? 2 : -1;
    case ReduceOp::min:
    case ReduceOp::max: return static_cast<double>((r * 13 + ii * 7) % 11 - (is_unsigned(t) ? 0 : 5));
    case ReduceOp::sum:
    case ReduceOp::avg: return static_cast<double>((r * 7 + ii * 3) % 5 - (is_unsigned(t) ? 0 : 2));
  }
  return 0;
}

double combine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return a + b;
    case ReduceOp::prod: return a * b;
    case ReduceOp::min: return std::min(a, b);
    case ReduceOp::max: return std::max(a, b);
  }
  return 0;
}

// op over ranks of input_value(..., q, i, ...), with avg's division.
double reference(DataType t, ReduceOp op, std::size_t i, int n) {
  double acc = input_value(t, op, 0, i, n);
  for (int q = 1; q < n; ++q) acc = combine(op, acc, input_value(t, op, q, i, n));
  if (op == ReduceOp::avg) acc = is_floating(t) ? acc / n : std::trunc(acc / n);
  return acc;
}

bool close(DataType t, double got, double want) {
  if (!is_floating(t)) return got == want;
  const double tol = (t == DataType::f16 || t == DataType::bf16) ? 1e-2 : 1e-6;
  return std::abs(got - want) <= tol * (1 + std::abs(want));
}

constexpr double kSentinel = 99;  // never a result of input_value's ops

std::vector<std::uint8_t> filled(DataType t, std::size_t count, double v) {
  std::vector<std::uint8_t> b(count * dtype_size(t));
  for (std::size_t i = 0; i < count; ++i) set(t, b, i, v);
  return b;
}

View view_of(std::vector<std::uint8_t>& b, DataType t) { return {b.data(), b.size() / dtype_size(t), t}; }

// ---- the sweep --------------------------------------------------------------

std::vector<std::size_t> counts_for(int n) {
  std::set<std::size_t> s{0, 1, 7, static_cast<std::size_t>(n - 1), static_cast<std::size_t>(n + 1), 1001};
  return {s.begin(), s.end()};
}

Config tiny_chunks() {
  Config cfg;
  cfg.chunk_bytes = 8;
  cfg.timeout = 60s;
  return cfg;
}

// Checks `got` element by element; stops at the first mismatch.
template <class Want>
void expect(DataType t, const std::vector<std::uint8_t>& got, std::size_t count, Want want, const std::string& what) {
  std::string bad;
  for (std::size_t i = 0; i < count && bad.empty(); ++i) {
    const double g = get(t, got, i), w = want(i);
    if (!close(t, g, w))
      bad = what + ": element " + std::to_string(i) + " is " + std::to_string(g) + ", expected " + std::to_string(w);
  }
  CHECK_MESSAGE(bad.empty(), bad);
}

std::string label(const Communicator& c, std::string_view alg, DataType t, ReduceOp op, std::size_t count,
                  bool in_place) {
  return std::string(alg) + " n=" + std::to_string(c.size()) + " rank=" + std::to_string(c.rank()) + " " +
         std::string(to_string(t)) + " " + std::string(to_string(op)) + " count=" + std::to_string(count) +
         (in_place ? " in-place" : "");
}

// One reducing call with inputs from input_value(); checks the result.
void check_reduction(Communicator& c, Collective coll, const CallOptions& o, std::size_t count, DataType t,
                     ReduceOp op, bool in_place) {
  const int n = c.size(), r = c.rank();
  const auto nn = static_cast<std::size_t>(n);
  const std::string what = label(c, o.algorithm, t, op, count, in_place);
  if (coll == Collective::allreduce) {
    auto in = filled(t, count, 0);
    for (std::size_t i = 0; i < count; ++i) set(t, in, i, input_value(t, op, r, i, n));
    if (in_place) {
      c.allreduce(view_of(in, t), op, o);
      expect(t, in, count, [&](std::size_t i) { return reference(t, op, i, n); }, what);
    } else {
      auto out = filled(t, count, kSentinel);
      c.allreduce(view_of(in, t), view_of(out, t), op, o);
      expect(t, out, count, [&](std::size_t i) { return reference(t, op, i, n); }, what);
      expect(t, in, count, [&](std::size_t i) { return input_value(t, op, r, i, n); }, what + " (input kept)");
    }
  } else if (coll == Collective::reduce_scatter) {
    auto in = filled(t, nn * count, 0);
    for (std::size_t i = 0; i < nn * count; ++i) set(t, in, i, input_value(t, op, r, i, n));
    auto out = filled(t, count, kSentinel);
    // In place: the output is this rank's block of the input (NCCL's convention).
    const std::size_t at = in_place ? static_cast<std::size_t>(r) * count : 0;
    View result = in_place ? View{in.data() + at * dtype_size(t), count, t} : view_of(out, t);
    c.reduce_scatter(view_of(in, t), result, op, o);
    const auto& got = in_place ? in : out;
    expect(t, got, at + count,
           [&](std::size_t i) {
             if (i < at) return input_value(t, op, r, i, n);  // the blocks before ours are untouched
             return reference(t, op, static_cast<std::size_t>(r) * count + i - at, n);
           },
           what);
  } else {
    for (int root : std::set<int>{0, n - 1}) {
      auto in = filled(t, count, 0);
      for (std::size_t i = 0; i < count; ++i) set(t, in, i, input_value(t, op, r, i, n));
      auto out = filled(t, count, kSentinel);
      auto& result = in_place ? in : out;
      c.reduce(view_of(in, t), view_of(result, t), op, root, o);
      if (r == root)
        expect(t, result, count, [&](std::size_t i) { return reference(t, op, i, n); }, what + " root");
      else if (in_place)
        expect(t, result, count, [&](std::size_t i) { return input_value(t, op, r, i, n); }, what + " non-root kept");
      else
        expect(t, result, count, [](std::size_t) { return kSentinel; }, what + " non-root output untouched");
    }
  }
}

void check_reducing(Communicator& c, Collective coll, std::string_view alg) {
  CallOptions o;
  o.algorithm = alg;
  for (const std::size_t count : counts_for(c.size()))
    for (const DataType t : kAllDataTypes)
      for (const ReduceOp op : kAllReduceOps)
        for (const bool in_place : {false, true}) check_reduction(c, coll, o, count, t, op, in_place);
}

// A value unique to (rank, element) that every dtype represents exactly.
double tagged(DataType t, int r, std::size_t i) {
  const double v = static_cast<double>((r * 37 + static_cast<long long>(i)) % 97);
  return is_unsigned(t) ? v : v - 48;
}

void check_moving(Communicator& c, Collective coll, std::string_view alg) {
  const int n = c.size(), r = c.rank();
  const auto nn = static_cast<std::size_t>(n);
  CallOptions o;
  o.algorithm = alg;
  const DataType types[] = {DataType::f16, DataType::i8, DataType::f64, DataType::bf16, DataType::u8, DataType::i64};
  const auto counts = counts_for(n);
  for (std::size_t k = 0; k < 2 * counts.size(); ++k) {
    const std::size_t count = counts[k / 2];
    const bool in_place = k % 2 == 1;
    const DataType t = types[k / 2 % std::size(types)];
    const std::string what = label(c, alg, t, ReduceOp::sum, count, in_place);
    switch (coll) {
      case Collective::allgather: {
        auto in = filled(t, count, 0);
        for (std::size_t i = 0; i < count; ++i) set(t, in, i, tagged(t, r, i));
        auto out = filled(t, nn * count, kSentinel);
        if (in_place) {  // the input is this rank's block of the output
          std::copy(in.begin(), in.end(), out.begin() + static_cast<std::ptrdiff_t>(r * count * dtype_size(t)));
          c.allgather(ConstView{out.data() + r * count * dtype_size(t), count, t}, view_of(out, t), o);
        } else {
          c.allgather(view_of(in, t), view_of(out, t), o);
        }
        expect(t, out, nn * count, [&](std::size_t i) { return tagged(t, static_cast<int>(i / count), i % count); },
               what);
        break;
      }
      case Collective::broadcast:  // always in place
        if (in_place) break;
        for (int root : std::set<int>{0, n / 2, n - 1}) {
          auto buf = filled(t, count, kSentinel);
          if (r == root)
            for (std::size_t i = 0; i < count; ++i) set(t, buf, i, tagged(t, root, i));
          c.broadcast(view_of(buf, t), root, o);
          expect(t, buf, count, [&](std::size_t i) { return tagged(t, root, i); }, what + " root " + std::to_string(root));
        }
        break;
      case Collective::all_to_all: {
        auto in = filled(t, nn * count, 0);
        for (std::size_t i = 0; i < nn * count; ++i) set(t, in, i, tagged(t, r, i));
        auto out = filled(t, nn * count, kSentinel);
        if (in_place) {
          out = in;
          c.all_to_all(view_of(out, t), view_of(out, t), o);
        } else {
          c.all_to_all(view_of(in, t), view_of(out, t), o);
        }
        // Block j of our output is block r of rank j's input.
        expect(t, out, nn * count,
               [&](std::size_t i) { return tagged(t, static_cast<int>(i / count), static_cast<std::size_t>(r) * count + i % count); },
               what);
        break;
      }
      case Collective::all_to_allv: {
        // Rank i sends cnt(i, j) elements to j (zero included); blocks are
        // separated by gaps that must stay untouched.
        auto cnt = [count](int i, int j) { return static_cast<std::size_t>((i + 2 * j) % 3) * count / 2; };
        std::vector<std::size_t> sc(nn), sd(nn), rc(nn), rd(nn);
        std::size_t in_size = 0, out_size = 0;
        for (int j = 0; j < n; ++j) {
          sc[j] = cnt(r, j);
          sd[j] = in_size;
          in_size += sc[j] + 1;
        }
        for (int j = n - 1; j >= 0; --j) {
          rc[j] = cnt(j, r);
          rd[j] = out_size;
          out_size += rc[j] + 2;
        }
        // In place: one buffer, large enough for both layouts; what no block
        // from another rank lands on keeps this rank's input.
        if (in_place) in_size = out_size = std::max(in_size, out_size);
        auto in = filled(t, in_size, 0);
        for (std::size_t i = 0; i < in_size; ++i) set(t, in, i, tagged(t, r, i));
        auto out = filled(t, out_size, kSentinel);
        if (in_place) {
          out = in;
          c.all_to_allv(view_of(out, t), sc, sd, view_of(out, t), rc, rd, o);
        } else {
          c.all_to_allv(view_of(in, t), sc, sd, view_of(out, t), rc, rd, o);
        }
        expect(t, out, out_size,
               [&](std::size_t i) {
                 for (int j = 0; j < n; ++j) {
                   if (i < rd[j] || i >= rd[j] + rc[j]) continue;
                   // Rank j's send displacement for us: its blocks 0..r-1 plus gaps.
                   std::size_t jd = 0;
                   for (int q = 0; q < r; ++q) jd += cnt(j, q) + 1;
                   return tagged(t, j, jd + i - rd[j]);
                 }
                 return in_place ? tagged(t, r, i) : kSentinel;
               },
               what);
        break;
      }
      case Collective::barrier:
        if (!in_place) c.barrier(o);
        break;
      case Collective::allreduce:
      case Collective::reduce_scatter:
      case Collective::reduce:
      case Collective::send:
      case Collective::recv: break;
    }
  }
}

bool reducing(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce_scatter || c == Collective::reduce;
}

void sweep(Collective coll, const std::vector<int>& sizes) {
  int algorithms = 0;
  for (const algo::Algorithm& a : algo::all_algorithms()) {
    if (a.collective != coll) continue;
    ++algorithms;
    for (int n : sizes) {
      INFO(to_string(coll), " ", a.name, " n=", n);
      run_local(n, tiny_chunks(), [&](Communicator& c) {
        if (reducing(coll))
          check_reducing(c, coll, a.name);
        else
          check_moving(c, coll, a.name);
      });
    }
  }
  CHECK(algorithms > 0);
}

const std::vector<int>& kWorldSizes = test::sweep_world_sizes();

// The world sizes up to `most` ranks, or above it: the longest sweeps run as
// two tests, which ctest runs side by side (under TSan all-reduce's whole
// sweep took 145-233 s, the sanitizer stage's longest test).
std::vector<int> sizes(bool up_to, int most) {
  std::vector<int> out;
  for (int n : kWorldSizes)
    if ((n <= most) == up_to) out.push_back(n);
  return out;
}

}  // namespace

// Split where the quick sweep's halves cost about the same (time grows about as n^2).
TEST_CASE("algorithms: allreduce, 1-7 ranks") { sweep(Collective::allreduce, sizes(true, 7)); }
TEST_CASE("algorithms: allreduce, 8 ranks and more") { sweep(Collective::allreduce, sizes(false, 7)); }
TEST_CASE("algorithms: reduce_scatter, 1-7 ranks") { sweep(Collective::reduce_scatter, sizes(true, 7)); }
TEST_CASE("algorithms: reduce_scatter, 8 ranks and more") { sweep(Collective::reduce_scatter, sizes(false, 7)); }
TEST_CASE("algorithms: allgather") { sweep(Collective::allgather, kWorldSizes); }
TEST_CASE("algorithms: broadcast") { sweep(Collective::broadcast, kWorldSizes); }
TEST_CASE("algorithms: reduce") { sweep(Collective::reduce, kWorldSizes); }
TEST_CASE("algorithms: all_to_all") { sweep(Collective::all_to_all, kWorldSizes); }
TEST_CASE("algorithms: all_to_allv") { sweep(Collective::all_to_allv, kWorldSizes); }
TEST_CASE("algorithms: barrier") { sweep(Collective::barrier, kWorldSizes); }

TEST_CASE("algorithms: allreduce results are bit-identical on every rank") {
  // Non-integer floats make the result depend on the reduction order; every
  // rank must still hold the very same bits.
  for (const algo::Algorithm& a : algo::all_algorithms()) {
    if (a.collective != Collective::allreduce) continue;
    for (int n : {3, 8, 13}) {
      INFO(a.name, " n=", n);
      const std::size_t count = 1001;
      std::vector<std::vector<float>> results(static_cast<std::size_t>(n));
      run_local(n, tiny_chunks(), [&](Communicator& c) {
        std::vector<float> v(count);
        for (std::size_t i = 0; i < count; ++i)
          v[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * c.rank()) * 1e3);
        CallOptions o;
        o.algorithm = a.name;
        c.allreduce(view(v), ReduceOp::sum, o);
        results[static_cast<std::size_t>(c.rank())] = v;
      });
      for (int r = 1; r < n; ++r)
        CHECK(std::memcmp(results[r].data(), results[0].data(), count * sizeof(float)) == 0);
      double max_err = 0;
      for (std::size_t i = 0; i < count; ++i) {
        double want = 0;
        for (int q = 0; q < n; ++q) want += static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * q) * 1e3);
        max_err = std::max(max_err, std::abs(results[0][i] - want));
      }
      CHECK(max_err < 1e-2);
    }
  }
}
