#include "calibration.hpp"

#include "log.hpp"
#include "reduce_kernels.hpp"

#include <comm/error.hpp>
#include <comm/types.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace comm {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kSmallBytes = 8;
// The default pipeline chunk: the size of the messages large collectives send.
constexpr std::size_t kLargeBytes = std::size_t{1} << 20;
constexpr int kWarmup = 16;
constexpr int kSmallIters = 64;
constexpr int kLargeIters = 16;
constexpr int kComputeIters = 5;
// Large messages and compute steps cycle through this many chunk-sized
// windows (8 MiB in all): a large collective streams its buffers through
// memory, so timing one chunk that stays in cache overstates bandwidth (UCX
// shm on the 2-core development VM: 17-21 GB/s from one cached chunk, flipping
// between runs, against a steadier 7-14 GB/s streaming).
constexpr std::size_t kWindows = 8;
// Longest single transport wait before re-checking the deadline.
constexpr auto kWaitSlice = std::chrono::milliseconds(50);

// The lower quartile: on a quiet machine it is within a few percent of the
// median, and when other processes share the cores it still reflects what
// the link can do rather than the scheduler (a tuning file outlives the job).
double lower_quartile(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 4];
}

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// Drives `t` until every completion is done; the same progress-then-wait loop
// the communicator uses, so the measured latency is the one collectives see.
// poll_only: never sleep in t.wait() (warm-up; see exchange_us).
void wait_all(Transport& t, std::initializer_list<Completion*> cs, int peer, Clock::time_point deadline,
              std::chrono::milliseconds timeout, bool poll_only) {
  auto pending = [&] {
    return std::any_of(cs.begin(), cs.end(), [](const Completion* c) { return c->is_pending(); });
  };
  while (pending()) {
    if (t.progress()) continue;
    if (!pending()) break;
    const auto now = Clock::now();
    if (now >= deadline) {
      for (Completion* c : cs)
        if (c->is_pending()) t.cancel(*c);
      throw Error(ErrorCode::timeout, "calibration: no answer from rank " + std::to_string(peer) + " within " +
                                          std::to_string(timeout.count()) +
                                          " ms during the link exchange (is that rank alive and calibrating too?)");
    }
    if (!poll_only) t.wait(std::min(deadline, now + kWaitSlice));
  }
  for (const Completion* c : cs)
    if (c->state.load(std::memory_order_acquire) == Completion::failed)
      throw Error(c->code, "calibration exchange with rank " + std::to_string(peer) + ": " + c->message);
}

// Lower-quartile time (µs) of one exchange of `bytes` with `peer`: both
// ranks post a receive and a send at once and wait for both, the step every
// collective schedule is made of, so a link is timed as collectives use it
// (both directions busy). A ping-pong would be the textbook measurement, but
// it is bimodal on a blocking transport: UCX shm answers in 0.12 us or, for
// whole runs, in 11.5 us per hop depending on how the two ranks' sleeps fall,
// while the exchange is stable. The warm-up polls without sleeping: right
// after creation two ranks that both sleep between messages can settle into
// paying the transport's whole spin and a wake-up on every message (UCX shm:
// 208 us per hop for tens of ms), which is not what a running job sees.
double exchange_us(Transport& t, int peer, std::size_t bytes, std::size_t windows, int iters, std::uint64_t tag,
                   std::chrono::milliseconds timeout) {
  std::vector<std::byte> out(bytes * windows, std::byte{0x5a}), in(bytes * windows);
  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(iters));
  const auto deadline = Clock::now() + timeout;
  for (int i = 0; i < kWarmup + iters; ++i) {
    Completion s, r;
    const auto t0 = Clock::now();
    const std::size_t at = static_cast<std::size_t>(i) % windows * bytes;
    t.irecv(peer, tag, in.data() + at, bytes, r);
    t.isend(peer, tag, out.data() + at, bytes, s);
    wait_all(t, {&s, &r}, peer, deadline, timeout, i < kWarmup);
    if (i >= kWarmup) times.push_back(micros(Clock::now() - t0));
  }
  return lower_quartile(std::move(times));
}

struct Throughput {
  double reduce_gbps = 0;
  double copy_gbps = 0;
};

// Host f32 sum and memcpy of chunk-sized pieces, each run through a
// different window (see kWindows); lower quartile of the runs.
Throughput measure_compute() {
  const std::size_t count = kLargeBytes / sizeof(float);
  std::vector<float> a(count * kWindows, 1.0f), b(count * kWindows, 2.0f), dst(count * kWindows, 0.0f);
  std::vector<double> reduce_us, copy_us;
  for (std::size_t i = 0; i < 1 + kComputeIters * kWindows; ++i) {
    const std::size_t at = i % kWindows * count;
    auto t0 = Clock::now();
    kernels::reduce(dst.data() + at, a.data() + at, b.data() + at, count, DataType::f32, ReduceOp::sum);
    auto t1 = Clock::now();
    std::memcpy(a.data() + (at + count) % (count * kWindows), dst.data() + at, kLargeBytes);
    auto t2 = Clock::now();
    if (i > 0) {
      reduce_us.push_back(micros(t1 - t0));
      copy_us.push_back(micros(t2 - t1));
    }
  }
  const auto gbps = [](double us) { return static_cast<double>(kLargeBytes) / (std::max(us, 1e-3) * 1e3); };
  return {gbps(lower_quartile(reduce_us)), gbps(lower_quartile(copy_us))};
}

std::string encode(double x, double y) {
  std::ostringstream os;
  os.precision(17);
  os << x << ' ' << y;
  return os.str();
}

void decode(const std::string& text, const std::string& key, double& x, double& y) {
  std::istringstream is(text);
  if (!(is >> x >> y))
    throw Error(ErrorCode::store_failure, "calibration: malformed value '" + text + "' at store key '" + key + "'");
}

}  // namespace

void calibrate_links(Transport& transport, Store& store, int rank, int size, LinkMatrix& links,
                     ComputeParams& compute, std::chrono::milliseconds timeout) {
  if (links.n != size)
    throw Error(ErrorCode::internal, "calibration: link matrix for " + std::to_string(links.n) + " ranks, group has " +
                                         std::to_string(size));
  if (const TransportCaps caps = transport.caps(); caps.stream_ordered || !caps.host_memory)
    throw Error(ErrorCode::unsupported,
                "COMM_CALIBRATE=1: transport '" + std::string(transport.name()) +
                    "' does not send host memory from the host (stream-ordered); calibration measures host "
                    "transports only: unset COMM_CALIBRATE for it");
  std::uint64_t phase = 0;
  for (LinkKind kind : kAllLinkKinds) {
    if (kind == LinkKind::self) continue;
    int a = -1, b = -1;
    for (int i = 0; i < size && a < 0; ++i)
      for (int j = i + 1; j < size; ++j)
        if (links.at(i, j).kind == kind) {
          a = i;
          b = j;
          break;
        }
    if (a < 0) continue;
    const std::string key = "calibration/link/" + std::string(to_string(kind));
    if (rank == a || rank == b) {
      const int peer = rank == a ? b : a;
      const double small =
          exchange_us(transport, peer, kSmallBytes, 1, kSmallIters, kCalibrationTag | phase, timeout);
      const double large =
          exchange_us(transport, peer, kLargeBytes, kWindows, kLargeIters, kCalibrationTag | (phase + 1), timeout);
      // The cost model charges alpha + bytes / beta per message; solve for both.
      const double alpha = small;
      const double extra_us = large > alpha ? large - alpha : large;
      const double beta = static_cast<double>(kLargeBytes - kSmallBytes) / (extra_us * 1e3);
      if (rank == a) store.set(key, encode(alpha, beta));
    }
    phase += 2;
    // Everyone (the pair included) waits for the published result, which also
    // keeps the next kind's pair from starting while this one measures.
    double alpha = 0, beta = 0;
    decode(store.get(key, timeout), key, alpha, beta);
    // Far off the transport's own figures usually means busy cores, not a slow link.
    const LinkInfo& nominal = links.at(a, b);
    if (rank == 0 && (alpha > 20 * nominal.alpha_us || beta < nominal.beta_gbps / 20))
      COMM_WARN("calibration: " << to_string(kind) << " link measured alpha " << alpha << " us, beta " << beta
                                << " GB/s, far from the transport's " << nominal.alpha_us << " us, "
                                << nominal.beta_gbps << " GB/s; are other processes busy on these cores?");
    for (auto& link : links.links)
      if (link.kind == kind) {
        link.alpha_us = alpha;
        link.beta_gbps = beta;
        if (link.detail.find("calibrated") == std::string::npos)
          link.detail += link.detail.empty() ? "calibrated" : ", calibrated";
      }
    COMM_INFO("calibration: " << to_string(kind) << " links alpha " << alpha << " us, beta " << beta
                              << " GB/s (ranks " << a << "-" << b << ")");
  }

  const Throughput mine = measure_compute();
  store.set("calibration/compute/" + std::to_string(rank), encode(mine.reduce_gbps, mine.copy_gbps));
  // Parsed values only (not `mine`), so every rank takes the min of identical numbers.
  Throughput slowest{std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  for (int r = 0; r < size; ++r) {
    const std::string key = "calibration/compute/" + std::to_string(r);
    Throughput t;
    decode(store.get(key, timeout), key, t.reduce_gbps, t.copy_gbps);
    slowest.reduce_gbps = std::min(slowest.reduce_gbps, t.reduce_gbps);
    slowest.copy_gbps = std::min(slowest.copy_gbps, t.copy_gbps);
  }
  compute.reduce_gbps = slowest.reduce_gbps;
  compute.copy_gbps = slowest.copy_gbps;
  COMM_INFO("calibration: reduce " << compute.reduce_gbps << " GB/s, copy " << compute.copy_gbps << " GB/s");
}

}  // namespace comm
