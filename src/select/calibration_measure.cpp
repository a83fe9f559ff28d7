#include "select/calibration_measure.hpp"
#include "util/c_locale.hpp"

#include "engine/progress.hpp"
#include "engine/reduce_kernels.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sched.h>
#include <sstream>
#include <sys/mman.h>
#include <unistd.h>

namespace comm::calib {
namespace {

constexpr int kOverlapWarmup = 2;
// Tag bit of the empty exchanges that isolate timed ones (below the tag kind bits).
constexpr std::uint64_t kSyncBit = std::uint64_t{1} << 40;

double at_fraction(const std::vector<double>& sorted, double f) {
  const double pos = f * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

}  // namespace

Scratch::Scratch() : faulted_(kLanes * kLaneBytes / kBlock) {
  void* p = ::mmap(nullptr, kLanes * kLaneBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw Error(ErrorCode::internal, "calibration: cannot map " + std::to_string(kLanes * kLaneBytes >> 20) +
                                         " MiB of scratch memory: " + std::strerror(errno));
  base_ = static_cast<std::byte*>(p);
}

Scratch::~Scratch() { ::munmap(base_, kLanes * kLaneBytes); }

std::byte* Scratch::lane(int lane, std::size_t bytes, std::size_t offset) {
  if (lane < 0 || lane >= kLanes || offset > kLaneBytes || bytes > kLaneBytes - offset)
    throw Error(ErrorCode::internal, "calibration: scratch lane " + std::to_string(lane) + " has no " +
                                         std::to_string(bytes) + " B at offset " + std::to_string(offset));
  const std::size_t from_base = static_cast<std::size_t>(lane) * kLaneBytes + offset;
  std::byte* const at = base_ + from_base;
  const std::size_t first = from_base / kBlock;
  const std::size_t end = (from_base + std::max<std::size_t>(bytes, 1) + kBlock - 1) / kBlock;
  for (std::size_t b = first; b < end;) {
    if (faulted_[b]) {
      ++b;
      continue;
    }
    std::size_t run = b;
    while (run < end && !faulted_[run]) faulted_[run++] = true;
    std::byte* const from = base_ + b * kBlock;
    const std::size_t len = (run - b) * kBlock;
#ifdef MADV_POPULATE_WRITE
    const bool populated = ::madvise(from, len, MADV_POPULATE_WRITE) == 0;
#else
    const bool populated = false;
#endif
    if (!populated) {  // an older kernel: a write per page
      const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
      for (std::size_t i = 0; i < len; i += page) static_cast<volatile std::byte*>(from)[i] = std::byte{0};
    }
    b = run;
  }
  return at;
}

double robust_median(std::vector<double> v) {
  if (v.empty()) throw Error(ErrorCode::internal, "calibration: a median of no samples");
  std::sort(v.begin(), v.end());
  const double q1 = at_fraction(v, 0.25), q3 = at_fraction(v, 0.75);
  const double lo = q1 - 1.5 * (q3 - q1), hi = q3 + 1.5 * (q3 - q1);
  std::vector<double> kept;
  kept.reserve(v.size());
  for (double x : v)
    if (x >= lo && x <= hi) kept.push_back(x);
  return at_fraction(kept.empty() ? v : kept, 0.5);
}

void wait_all(Transport& t, std::initializer_list<Completion*> cs, int peer, Clock::time_point deadline,
              std::chrono::milliseconds timeout, bool poll_only) {
  const auto done = [&] {
    return std::none_of(cs.begin(), cs.end(), [](const Completion* c) { return c->is_pending(); });
  };
  const bool finished = detail::progress_until(
      done, [&] { return t.progress(); },
      [&](Clock::time_point until) {
        // Polling yields: a transport whose completions come from a thread of
        // its own (Gloo's event loop) must get the core when ranks share it.
        if (poll_only)
          sched_yield();
        else
          t.wait(until);
      },
      deadline);
  if (!finished) {
    for (Completion* c : cs)
      if (c->is_pending()) t.cancel(*c);
    throw Error(ErrorCode::timeout, "calibration: no answer from rank " + std::to_string(peer) + " within " +
                                        std::to_string(timeout.count()) +
                                        " ms during the link exchange (is that rank alive and calibrating too?)");
  }
  for (const Completion* c : cs)
    if (c->state.load(std::memory_order_acquire) == Completion::failed)
      throw Error(c->code, "calibration exchange with rank " + std::to_string(peer) + ": " + c->message);
}

std::vector<double> exchange_times(Transport& t, int to, int from, std::size_t bytes, ExchangeBuffers& buffers,
                                   std::size_t windows, int warmup, int iters, std::uint64_t tag,
                                   std::chrono::milliseconds timeout, bool isolated) {
  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(iters));
  const auto deadline = Clock::now() + timeout;
  for (int i = 0; i < warmup + iters; ++i) {
    if (isolated) {
      Completion s0, r0;
      t.irecv(from, tag | kSyncBit, nullptr, 0, r0);
      t.isend(to, tag | kSyncBit, nullptr, 0, s0);
      wait_all(t, {&s0, &r0}, from, deadline, timeout, i < warmup);
    }
    Completion s, r;
    const std::size_t at = static_cast<std::size_t>(i) % windows * bytes;
    const auto t0 = Clock::now();
    t.irecv(from, tag, buffers.in + at, bytes, r);
    t.isend(to, tag, buffers.out + at, bytes, s);
    wait_all(t, {&s, &r}, from, deadline, timeout, i < warmup);
    if (i >= warmup) times.push_back(micros(Clock::now() - t0));
  }
  return times;
}

std::vector<double> slower_of_pair(Store& store, const std::string& key, int rank, int peer,
                                   const std::vector<double>& times, std::chrono::milliseconds timeout) {
  store.set(key + std::to_string(rank), encode(times));
  const std::string k = key + std::to_string(peer);
  std::vector<double> theirs = decode(store.get(k, timeout), k, times.size());
  for (std::size_t i = 0; i < times.size(); ++i) theirs[i] = std::max(theirs[i], times[i]);
  return theirs;
}

Overlap overlap_us(Transport& t, Scratch& scratch, int peer, std::size_t bytes, int iters, std::uint64_t tag,
                   std::chrono::milliseconds timeout) {
  // The exchange and the reduce running beside it touch none of each other's bytes.
  std::byte* const out = scratch.lane(0, bytes);
  std::byte* const in = scratch.lane(1, bytes);
  const std::size_t count = bytes / sizeof(float);
  const float* const a = scratch.floats(0, count, count);
  const float* const b = scratch.floats(0, count, 2 * count);
  float* const dst = scratch.floats(1, count, count);
  std::vector<double> reduce, both;
  const auto deadline = Clock::now() + timeout;
  for (int i = 0; i < kOverlapWarmup + iters; ++i) {
    auto t0 = Clock::now();
    kernels::reduce(dst, a, b, count, DataType::f32, ReduceOp::sum);
    const double alone = micros(Clock::now() - t0);
    Completion s, r;
    t0 = Clock::now();
    t.irecv(peer, tag, in, bytes, r);
    t.isend(peer, tag, out, bytes, s);
    kernels::reduce(dst, a, b, count, DataType::f32, ReduceOp::sum);
    wait_all(t, {&s, &r}, peer, deadline, timeout, false);
    if (i >= kOverlapWarmup) {
      reduce.push_back(alone);
      both.push_back(micros(Clock::now() - t0));
    }
  }
  return {robust_median(std::move(reduce)), robust_median(std::move(both))};
}

Throughput measure_compute(Scratch& scratch, std::size_t piece, std::size_t windows, int iters) {
  const std::size_t count = piece / sizeof(float);
  float* const a = scratch.floats(0, count * windows);
  const float* const b = scratch.floats(0, count * windows, count * windows);
  float* const dst = scratch.floats(1, count * windows);
  std::vector<double> reduce_us, copy_us;
  const std::size_t runs = 1 + static_cast<std::size_t>(iters) * windows;
  for (std::size_t i = 0; i < runs; ++i) {
    const std::size_t at = i % windows * count;
    auto t0 = Clock::now();
    kernels::reduce(dst + at, a + at, b + at, count, DataType::f32, ReduceOp::sum);
    auto t1 = Clock::now();
    std::memcpy(a + (at + count) % (count * windows), dst + at, piece);
    auto t2 = Clock::now();
    if (i > 0) {
      reduce_us.push_back(micros(t1 - t0));
      copy_us.push_back(micros(t2 - t1));
    }
  }
  const auto gbps = [piece](double us) { return static_cast<double>(piece) / (std::max(us, 1e-3) * 1e3); };
  return {gbps(robust_median(reduce_us)), gbps(robust_median(copy_us))};
}

std::string encode(const std::vector<double>& values) {
  std::ostringstream os = util::c_ostream();  // the same text whatever the locale
  os.precision(17);
  for (double v : values) os << v << ' ';
  return os.str();
}

std::vector<double> decode(const std::string& text, const std::string& key, std::size_t n) {
  std::istringstream is = util::c_istream(text);
  std::vector<double> v(n);
  for (double& x : v)
    if (!(is >> x))
      throw Error(ErrorCode::store_failure, "calibration: malformed value '" + text + "' at store key '" + key + "'");
  return v;
}

}  // namespace comm::calib
