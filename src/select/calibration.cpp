#include "select/calibration.hpp"
#include "util/c_locale.hpp"

#include "engine/progress.hpp"
#include "engine/reduce_kernels.hpp"
#include "util/log.hpp"

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

// Exchange sizes timed per link kind: a geometric ladder dense around the
// rendezvous thresholds transports use (UCX tcp switches between 16 and 32
// KiB, shm later), ending at the default pipeline chunk (1 MiB), the size of
// the messages large collectives send.
constexpr std::size_t kLadder[] = {8, 1024, 4096, 8192, 16384, 24576, 32768, 65536, 262144, std::size_t{1} << 20};
constexpr std::size_t kLargeBytes = std::size_t{1} << 20;
constexpr int kWarmup = 16;
constexpr int kSmallIters = 32;  // per ladder size up to 64 KiB
constexpr int kLargeIters = 16;
constexpr int kComputeIters = 40;
// Two regimes, as a collective sees them: the ladder and the in-cache
// compute rates reuse one buffer (a collective of a few MiB finds its data in
// cache: UCX shm moves a cached 1 MiB chunk at 17-21 GB/s on the 2-core
// development VM), and the large-data figures stream through many windows.
// The large-data regime: 1 MiB pieces spread over 12 windows per buffer (36
// MiB for a reduce's three buffers; 48 MiB for the two ranks' exchange
// buffers), beyond the development VM's 32 MiB L3, so they come from memory
// as a many-MiB collective's do. More windows cost first-touch time (32: +100
// ms) without changing the rates measured.
constexpr std::size_t kBigWindows = 12;
constexpr int kBigWarmup = 2;
// Collective data size above which the large-data figures apply. On the
// development VM (UCX shm, 2 ranks) all-reduce time per byte is flat up to 2
// MiB and 1.5-1.9x higher from 8 MiB on, for every algorithm.
constexpr std::size_t kCacheBytes = std::size_t{4} << 20;

// The lower quartile: on a quiet machine it is within a few percent of the
// median, and when other processes share the cores it still reflects what
// the link can do rather than the scheduler (a tuning file outlives the job).
double lower_quartile(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 4];
}

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// Drives `t` until every completion is done, through the communicator's own
// progress loop (engine/progress.hpp), so the measured latency is the one
// collectives see. poll_only: never sleep in t.wait() (warm-up; see exchange_us).
void wait_all(Transport& t, std::initializer_list<Completion*> cs, int peer, Clock::time_point deadline,
              std::chrono::milliseconds timeout, bool poll_only) {
  const auto done = [&] {
    return std::none_of(cs.begin(), cs.end(), [](const Completion* c) { return c->is_pending(); });
  };
  const bool finished = detail::progress_until(
      done, [&] { return t.progress(); },
      [&](Clock::time_point until) {
        if (!poll_only) t.wait(until);
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
double exchange_us(Transport& t, int peer, std::size_t bytes, std::size_t windows, int warmup, int iters,
                   std::uint64_t tag, std::chrono::milliseconds timeout) {
  std::vector<std::byte> out(bytes * windows, std::byte{0x5a}), in(bytes * windows);
  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(iters));
  const auto deadline = Clock::now() + timeout;
  for (int i = 0; i < warmup + iters; ++i) {
    Completion s, r;
    const auto t0 = Clock::now();
    const std::size_t at = static_cast<std::size_t>(i) % windows * bytes;
    t.irecv(peer, tag, in.data() + at, bytes, r);
    t.isend(peer, tag, out.data() + at, bytes, s);
    wait_all(t, {&s, &r}, peer, deadline, timeout, i < warmup);
    if (i >= warmup) times.push_back(micros(Clock::now() - t0));
  }
  return lower_quartile(std::move(times));
}

// Lower-quartile times (µs) of a reduce of `bytes` alone and of an exchange
// of `bytes` with `peer` while the same reduce runs: whether the link's data
// moves while this rank computes (a NIC, a peer's copy) or only through this
// rank's CPU and progress calls (shared memory, loopback sockets).
struct Overlap {
  double reduce_us = 0;
  double both_us = 0;
};

Overlap overlap_us(Transport& t, int peer, std::size_t bytes, int iters, std::uint64_t tag,
                   std::chrono::milliseconds timeout) {
  std::vector<std::byte> out(bytes, std::byte{0x5a}), in(bytes);
  const std::size_t count = bytes / sizeof(float);
  std::vector<float> a(count, 1.0f), b(count, 2.0f), dst(count, 0.0f);
  std::vector<double> reduce, both;
  const auto deadline = Clock::now() + timeout;
  for (int i = 0; i < kBigWarmup + iters; ++i) {
    auto t0 = Clock::now();
    kernels::reduce(dst.data(), a.data(), b.data(), count, DataType::f32, ReduceOp::sum);
    const double alone = micros(Clock::now() - t0);
    Completion s, r;
    t0 = Clock::now();
    t.irecv(peer, tag, in.data(), bytes, r);
    t.isend(peer, tag, out.data(), bytes, s);
    kernels::reduce(dst.data(), a.data(), b.data(), count, DataType::f32, ReduceOp::sum);
    wait_all(t, {&s, &r}, peer, deadline, timeout, false);
    if (i >= kBigWarmup) {
      reduce.push_back(alone);
      both.push_back(micros(Clock::now() - t0));
    }
  }
  return {lower_quartile(std::move(reduce)), lower_quartile(std::move(both))};
}

struct Throughput {
  double reduce_gbps = 0;
  double copy_gbps = 0;
};

// Host f32 sum and memcpy of chunk-sized pieces, each run through a
// different one of `windows` windows (1: in cache; kBigWindows: from memory);
// lower quartile of the runs.
Throughput measure_compute(std::size_t windows, int iters) {
  const std::size_t count = kLargeBytes / sizeof(float);
  std::vector<float> a(count * windows, 1.0f), b(count * windows, 2.0f), dst(count * windows, 0.0f);
  std::vector<double> reduce_us, copy_us;
  for (std::size_t i = 0; i < 1 + iters * windows; ++i) {
    const std::size_t at = i % windows * count;
    auto t0 = Clock::now();
    kernels::reduce(dst.data() + at, a.data() + at, b.data() + at, count, DataType::f32, ReduceOp::sum);
    auto t1 = Clock::now();
    std::memcpy(a.data() + (at + count) % (count * windows), dst.data() + at, kLargeBytes);
    auto t2 = Clock::now();
    if (i > 0) {
      reduce_us.push_back(micros(t1 - t0));
      copy_us.push_back(micros(t2 - t1));
    }
  }
  const auto gbps = [](double us) { return static_cast<double>(kLargeBytes) / (std::max(us, 1e-3) * 1e3); };
  return {gbps(lower_quartile(reduce_us)), gbps(lower_quartile(copy_us))};
}

std::string encode(const std::vector<double>& values) {
  std::ostringstream os = util::c_ostream();
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

}  // namespace

LinkFit fit_link(const std::vector<std::pair<std::size_t, double>>& samples) {
  const std::size_t m = samples.size();
  if (m < 3)
    throw Error(ErrorCode::internal, "calibration: fitting a link needs at least 3 message sizes, got " +
                                         std::to_string(m));
  // Weighted least squares of t = alpha + bytes * x + extra * [rendezvous],
  // weight 1/t^2 (relative error: 8 B and 1 MiB count alike), for every split.
  struct Solution {
    double sse = std::numeric_limits<double>::infinity();
    double alpha = 0, x = 0, extra = 0;
  };
  const auto solve = [&](std::size_t k) {  // samples[k..] rendezvous; k == m: none
    const std::size_t p = k < m ? 3 : 2;
    double a[3][3] = {}, rhs[3] = {};
    for (std::size_t i = 0; i < m; ++i) {
      const double t = std::max(samples[i].second, 1e-6);
      const double w = 1.0 / (t * t);
      const double f[3] = {1.0, static_cast<double>(samples[i].first), i >= k ? 1.0 : 0.0};
      for (std::size_t r = 0; r < p; ++r) {
        rhs[r] += w * f[r] * t;
        for (std::size_t c = 0; c < p; ++c) a[r][c] += w * f[r] * f[c];
      }
    }
    // Gaussian elimination; the sizes are distinct, so the system is regular.
    for (std::size_t c = 0; c < p; ++c)
      for (std::size_t r = c + 1; r < p; ++r) {
        const double q = a[r][c] / a[c][c];
        for (std::size_t j = c; j < p; ++j) a[r][j] -= q * a[c][j];
        rhs[r] -= q * rhs[c];
      }
    double v[3] = {};
    for (std::size_t c = p; c-- > 0;) {
      double sum = rhs[c];
      for (std::size_t j = c + 1; j < p; ++j) sum -= a[c][j] * v[j];
      v[c] = sum / a[c][c];
    }
    Solution sol{0, v[0], v[1], v[2]};
    for (std::size_t i = 0; i < m; ++i) {
      const double t = std::max(samples[i].second, 1e-6);
      const double e = (sol.alpha + static_cast<double>(samples[i].first) * sol.x + (i >= k ? sol.extra : 0) - t) / t;
      sol.sse += e * e;
    }
    return sol;
  };
  LinkFit f;
  Solution best = solve(m);
  const double none_sse = best.sse;
  for (std::size_t k = 1; k + 1 < m; ++k) {  // at least the two largest sizes in the rendezvous group
    const Solution s = solve(k);
    // A step must be more than noise and explain the data clearly better than no step.
    if (s.x > 0 && s.extra > std::max(0.5, 0.25 * std::max(s.alpha, 0.0)) && s.sse < 0.5 * none_sse &&
        s.sse < best.sse) {
      best = s;
      f.rndv_threshold_bytes = samples[k - 1].first;
      f.rndv_extra_us = s.extra;
    }
  }
  // Degenerate data (noise inverting the slope): fall back to the two-point line through the ends.
  if (!(best.x > 0)) {
    best.x = std::max(samples[m - 1].second - samples[0].second, 1e-3) /
             static_cast<double>(samples[m - 1].first - samples[0].first);
    best.alpha = samples[0].second - static_cast<double>(samples[0].first) * best.x;
  }
  f.alpha_us = std::max(best.alpha, 0.0);
  f.beta_gbps = 1.0 / (best.x * 1e3);
  return f;
}

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
      std::vector<std::pair<std::size_t, double>> samples;
      for (const std::size_t bytes : kLadder) {
        const bool big = bytes >= (std::size_t{256} << 10);
        samples.emplace_back(bytes, exchange_us(transport, peer, bytes, 1, kWarmup,
                                                big ? kLargeIters : kSmallIters, kCalibrationTag | phase++, timeout));
      }
      const LinkFit fit = fit_link(samples);
      for (const auto& [bytes, us] : samples)
        COMM_DEBUG("calibration: " << to_string(kind) << " exchange of " << bytes << " B: " << us << " us");
      const double streamed = exchange_us(transport, peer, kLargeBytes, kBigWindows, kBigWarmup, kLargeIters,
                                          kCalibrationTag | phase++, timeout);
      const double handshake = kLargeBytes > fit.rndv_threshold_bytes ? fit.rndv_extra_us : 0.0;
      const double big_us = std::max(streamed - fit.alpha_us - handshake, 1e-3);
      const double beta_large = std::min(static_cast<double>(kLargeBytes) / (big_us * 1e3), fit.beta_gbps);
      // Overlapped, the pair costs about max(exchange, reduce); through our own CPU, their sum.
      const Overlap ov = overlap_us(transport, peer, kLargeBytes, kLargeIters, kCalibrationTag | phase++, timeout);
      const double exchange = samples.back().second;
      const bool receiver_copies = ov.both_us > std::max(exchange, ov.reduce_us) + 0.5 * std::min(exchange, ov.reduce_us);
      COMM_DEBUG("calibration: " << to_string(kind) << " 1 MiB exchange " << exchange << " us, reduce " << ov.reduce_us
                                 << " us, both at once " << ov.both_us << " us");
      if (rank == a)
        store.set(key, encode({fit.alpha_us, fit.beta_gbps, static_cast<double>(fit.rndv_threshold_bytes),
                               fit.rndv_extra_us, beta_large, receiver_copies ? 1.0 : 0.0}));
    } else {
      phase += std::size(kLadder) + 2;
    }
    // Everyone (the pair included) waits for the published result, which also
    // keeps the next kind's pair from starting while this one measures.
    const std::vector<double> v = decode(store.get(key, timeout), key, 6);
    const double alpha = v[0], beta = v[1], extra = v[3], beta_large = v[4];
    // A double holds every threshold the ladder can produce exactly; "none" is the largest size_t.
    const std::size_t threshold =
        v[2] >= static_cast<double>(std::numeric_limits<std::size_t>::max()) ? std::numeric_limits<std::size_t>::max()
                                                                             : static_cast<std::size_t>(v[2]);
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
        link.rndv_threshold_bytes = threshold;
        link.rndv_extra_us = extra;
        link.beta_large_gbps = beta_large;
        link.receiver_copies = v[5] != 0;
        if (link.detail.find("calibrated") == std::string::npos)
          link.detail += link.detail.empty() ? "calibrated" : ", calibrated";
      }
    COMM_INFO("calibration: " << to_string(kind) << " links alpha " << alpha << " us, beta " << beta
                              << " GB/s, "
                              << (threshold == std::numeric_limits<std::size_t>::max()
                                      ? std::string("no rendezvous step")
                                      : "rendezvous above " + std::to_string(threshold) + " B: +" +
                                            util::shortest(extra) + " us")
                              << ", large-data beta " << beta_large << " GB/s"
                              << (v[5] != 0 ? ", moved by the receiver's CPU" : "") << " (ranks " << a << "-" << b
                              << ")");
  }

  const Throughput mine = measure_compute(1, kComputeIters);
  const Throughput mine_large = measure_compute(kBigWindows, 1);
  store.set("calibration/compute/" + std::to_string(rank),
            encode({mine.reduce_gbps, mine.copy_gbps, mine_large.reduce_gbps, mine_large.copy_gbps}));
  // Parsed values only (not `mine`), so every rank takes the min of identical numbers.
  std::vector<double> slowest(4, std::numeric_limits<double>::infinity());
  for (int r = 0; r < size; ++r) {
    const std::string key = "calibration/compute/" + std::to_string(r);
    const std::vector<double> v = decode(store.get(key, timeout), key, 4);
    for (std::size_t i = 0; i < 4; ++i) slowest[i] = std::min(slowest[i], v[i]);
  }
  compute.reduce_gbps = slowest[0];
  compute.copy_gbps = slowest[1];
  // Memory is never faster than cache; a noisy sample must not say otherwise.
  compute.reduce_large_gbps = std::min(slowest[2], slowest[0]);
  compute.copy_large_gbps = std::min(slowest[3], slowest[1]);
  compute.cache_bytes = kCacheBytes;
  COMM_INFO("calibration: reduce " << compute.reduce_gbps << " GB/s (" << compute.reduce_large_gbps
                                   << " from memory), copy " << compute.copy_gbps << " GB/s ("
                                   << compute.copy_large_gbps << " from memory)");
}

}  // namespace comm
