#include "stats.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace comm::bench {

std::string_view to_string(BenchColl c) noexcept {
  switch (c) {
    case BenchColl::allreduce: return "allreduce";
    case BenchColl::reduce_scatter: return "reduce_scatter";
    case BenchColl::allgather: return "allgather";
    case BenchColl::broadcast: return "broadcast";
    case BenchColl::reduce: return "reduce";
    case BenchColl::alltoall: return "alltoall";
    case BenchColl::sendrecv: return "sendrecv";
  }
  return "?";
}

BenchColl parse_bench_coll(std::string_view name) {
  std::string n(name);
  std::replace(n.begin(), n.end(), '-', '_');
  for (BenchColl c : kAllBenchColls)
    if (n == to_string(c)) return c;
  if (n == "all_to_all") return BenchColl::alltoall;
  if (n == "all_reduce") return BenchColl::allreduce;
  if (n == "all_gather") return BenchColl::allgather;
  if (n == "p2p" || n == "pingpong") return BenchColl::sendrecv;
  std::string valid;
  for (BenchColl c : kAllBenchColls) valid += (valid.empty() ? "" : ", ") + std::string(to_string(c));
  throw Error(ErrorCode::invalid_argument, "unknown collective '" + std::string(name) + "' (valid: " + valid + ")");
}

Collective to_collective(BenchColl c) noexcept {
  switch (c) {
    case BenchColl::allreduce: return Collective::allreduce;
    case BenchColl::reduce_scatter: return Collective::reduce_scatter;
    case BenchColl::allgather: return Collective::allgather;
    case BenchColl::broadcast: return Collective::broadcast;
    case BenchColl::reduce: return Collective::reduce;
    case BenchColl::alltoall: return Collective::all_to_all;
    case BenchColl::sendrecv: return Collective::send;
  }
  return Collective::send;
}

bool has_reduce_op(BenchColl c) noexcept {
  return c == BenchColl::allreduce || c == BenchColl::reduce_scatter || c == BenchColl::reduce;
}

bool has_root(BenchColl c) noexcept { return c == BenchColl::broadcast || c == BenchColl::reduce; }

double busbw_factor(BenchColl c, int nranks) noexcept {
  const double n = nranks;
  switch (c) {
    case BenchColl::allreduce: return nranks > 0 ? 2.0 * (n - 1) / n : 0.0;
    case BenchColl::reduce_scatter:
    case BenchColl::allgather:
    case BenchColl::alltoall: return nranks > 0 ? (n - 1) / n : 0.0;
    case BenchColl::broadcast:
    case BenchColl::reduce:
    case BenchColl::sendrecv: return 1.0;
  }
  return 1.0;
}

Layout make_layout(BenchColl c, std::size_t requested_bytes, std::size_t elem_size, int nranks) noexcept {
  const std::size_t n = static_cast<std::size_t>(std::max(nranks, 1));
  const std::size_t elems = requested_bytes / elem_size;
  Layout l;
  switch (c) {
    case BenchColl::reduce_scatter:
    case BenchColl::allgather:
    case BenchColl::alltoall: {
      l.block = elems / n;
      l.count = l.block * n;
      l.in_count = c == BenchColl::allgather ? l.block : l.count;
      l.out_count = c == BenchColl::reduce_scatter ? l.block : l.count;
      break;
    }
    case BenchColl::allreduce:
    case BenchColl::broadcast:
    case BenchColl::reduce:
    case BenchColl::sendrecv:
      l.count = l.block = l.in_count = l.out_count = elems;
      break;
  }
  l.bytes = l.count * elem_size;
  return l;
}

std::vector<std::size_t> size_sweep(std::size_t min_bytes, std::size_t max_bytes, double factor) {
  std::vector<std::size_t> sizes;
  if (min_bytes > max_bytes) return sizes;
  double s = static_cast<double>(min_bytes);
  std::size_t last = 0;
  while (s < static_cast<double>(max_bytes)) {
    const auto b = static_cast<std::size_t>(s);
    if (sizes.empty() || b != last) sizes.push_back(b);
    last = b;
    // A minimum of 0 would never grow; the next point is then 1 byte.
    s = s == 0 ? 1 : s * factor;
  }
  if (sizes.empty() || sizes.back() != max_bytes) sizes.push_back(max_bytes);
  return sizes;
}

std::vector<std::size_t> size_sweep_linear(std::size_t min_bytes, std::size_t max_bytes, std::size_t step) {
  std::vector<std::size_t> sizes;
  for (std::size_t b = min_bytes; b < max_bytes && step > 0; b += step) sizes.push_back(b);
  if (min_bytes <= max_bytes && (sizes.empty() || sizes.back() != max_bytes)) sizes.push_back(max_bytes);
  return sizes;
}

namespace {
// Above 4 MiB a run costs milliseconds per iteration; 10 iterations still
// give a median that survives the odd multi-millisecond stall of a shared host.
constexpr std::size_t kScaleAbove = std::size_t{4} << 20;
constexpr int kMinScaledIters = 10;
}  // namespace

int scaled_iters(int iters, std::size_t bytes) noexcept {
  if (iters <= 0 || bytes <= kScaleAbove) return std::max(iters, 0);
  const double scaled = static_cast<double>(iters) * static_cast<double>(kScaleAbove) / static_cast<double>(bytes);
  return std::max(std::min(iters, kMinScaledIters), static_cast<int>(scaled));
}

int scaled_warmup(int warmup, std::size_t bytes) noexcept {
  if (warmup <= 0 || bytes <= kScaleAbove) return std::max(warmup, 0);
  const double scaled = static_cast<double>(warmup) * static_cast<double>(kScaleAbove) / static_cast<double>(bytes);
  return std::max(1, static_cast<int>(scaled));
}

std::int64_t warmup_top_up(int warm, double took_us) noexcept {
  if (warm <= 0 || took_us <= 0 || took_us >= kMinWarmupUs) return 0;
  const double per_call_us = took_us / warm;
  return std::min<std::int64_t>(kMaxWarmupCalls, static_cast<std::int64_t>((kMinWarmupUs - took_us) / per_call_us) + 1);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

double median(std::vector<double> v) { return percentile(std::move(v), 50.0); }

double gbps(std::size_t bytes, double us) noexcept {
  return us > 0 ? static_cast<double>(bytes) / (us * 1e3) : 0.0;
}

}  // namespace comm::bench
