#include "select/calibration.hpp"
#include "util/c_locale.hpp"

#include "select/calibration_measure.hpp"
#include "util/log.hpp"

#include <comm/error.hpp>
#include <comm/types.hpp>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace comm {
namespace {

using calib::Clock;

// Exchange sizes timed per link kind: a geometric ladder dense around the
// rendezvous thresholds transports use (UCX tcp switches between 16 and 32
// KiB, shm later), ending at the default pipeline chunk (1 MiB), the size of
// the messages large collectives send.
constexpr std::size_t kLadder[] = {8,      1024,   4096,   8192,   16384,  24576,
                                   32768,  65536,  131072, 262144, 524288, std::size_t{1} << 20};
constexpr std::size_t kLargeBytes = std::size_t{1} << 20;
constexpr std::size_t kBigFrom = std::size_t{256} << 10;
// The ladder is walked kRounds times, a few exchanges per size each time, so
// a burst of load on a busy machine lands on a few samples of every size
// rather than on all samples of one (which would bend the fitted line).
constexpr int kRounds = 4;
constexpr int kSmallPerRound = 6;
constexpr int kBigPerRound = 3;
constexpr int kWarmup = 16;
constexpr int kStreamIters = 8;
constexpr int kOverlapIters = 6;
constexpr int kComputeIters = 12;
constexpr int kContentionWarmup = 4;
constexpr int kContentionIters = 24;
// The large-data regime: 1 MiB pieces spread over many windows, beyond the
// development VM's 32 MiB L3, so they come from memory as a many-MiB
// collective's do. Ranks sharing a host share the memory bus and the cache,
// so with more of them each needs fewer windows (and less first-touch time):
// with 8 ranks on 2 cores over TCP links, taken for ranks of different hosts
// (12 windows each, 288 MiB touched at once), it took 150-230 ms.
constexpr std::size_t kBigWindows = 12;
constexpr std::size_t kMinBigWindows = 4;
// Whether a link of `kind` moves its data by CPU copies within the host (shared
// memory: a process_vm_readv or a copy through a ring), so that it slows from
// memory as a memcpy does: its large-data beta is its beta times the host's
// from-memory / in-cache copy rate ratio (calibrate_links), with no streamed
// exchange. Over comm's shm, isolated 1 MiB exchanges from memory took 90-110
// or 170-350 us at random (a window's first one 460-500), a 4 MiB one 690-1000,
// and the beta they gave (2.3-5.3 GB/s from job to job) made tree at 8-32 MiB
// 1.4-2.1x too slow in every run, while a 2-rank ping-pong of 2-8 MiB ran at
// 10-11 GB/s and the bare model with 9.3 GB/s put ring, tree, direct and
// mem_twoshot at 8 MiB within 1.0-1.1x of their measured times. The copy
// ratio (0.43-0.82 from job to job here) put 248-249 of 264 shm predictions
// within 25 % in two sets of three runs that had 228 and 241
// (tools/bench/repredict.py), and 86 of 88 in the next set measured.
bool moved_by_copies(LinkKind kind) { return kind == LinkKind::shm; }
// Collective data size above which the large-data figures apply. On the
// development VM (UCX shm, 2 ranks) all-reduce time per byte is flat up to 2
// MiB and 1.5-1.9x higher from 8 MiB on, for every algorithm.
constexpr std::size_t kCacheBytes = std::size_t{4} << 20;
// Values published per link kind (see measure_kind): seven figures, then the
// transfer curve's time at each ladder size.
constexpr std::size_t kKindFigures = 7;
constexpr std::size_t kKindValues = kKindFigures + std::size(kLadder);

std::uint64_t tag_of(std::size_t kind_index, std::uint64_t n) {
  return kCalibrationTag | (static_cast<std::uint64_t>(kind_index) << 16) | n;
}

// Measures the link to `peer` (this rank and the peer both call it) and
// returns {alpha, beta, threshold, extra, beta_large, receiver_copies, 8 B
// exchange} followed by the transfer curve's time at each ladder size.
std::vector<double> measure_kind(Transport& t, Store& store, calib::Scratch& scratch, int rank, int peer,
                                 std::size_t kind_index, LinkKind kind, std::chrono::milliseconds timeout) {
  std::uint64_t n = 0;
  const auto t0 = Clock::now();
  calib::ExchangeBuffers small(scratch, kLargeBytes, 1);
  calib::exchange_times(t, peer, peer, kLadder[0], small, 1, kWarmup, 0, tag_of(kind_index, n++), timeout);
  // Every exchange isolated, and each iteration's time the slower rank's: as
  // comm-bench (and a job's critical path) sees a collective step.
  std::vector<double> all;
  for (int round = 0; round < kRounds; ++round)
    for (const std::size_t bytes : kLadder) {
      const int iters = bytes >= kBigFrom ? kBigPerRound : kSmallPerRound;
      const auto ts = calib::exchange_times(t, peer, peer, bytes, small, 1, 0, iters, tag_of(kind_index, n++),
                                            timeout, true);
      all.insert(all.end(), ts.begin(), ts.end());
    }
  if (!moved_by_copies(kind)) {
    calib::ExchangeBuffers big(scratch, kLargeBytes, kBigWindows);
    const auto streamed_times = calib::exchange_times(t, peer, peer, kLargeBytes, big, kBigWindows, 2, kStreamIters,
                                                      tag_of(kind_index, n++), timeout, true);
    all.insert(all.end(), streamed_times.begin(), streamed_times.end());
  }
  all = calib::slower_of_pair(store, "calibration/pair/" + std::string(to_string(kind)) + "/", rank, peer, all,
                              timeout);
  std::vector<std::vector<double>> times(std::size(kLadder));
  std::size_t at = 0;
  for (int round = 0; round < kRounds; ++round)
    for (std::size_t i = 0; i < std::size(kLadder); ++i) {
      const auto iters = static_cast<std::size_t>(kLadder[i] >= kBigFrom ? kBigPerRound : kSmallPerRound);
      times[i].insert(times[i].end(), all.begin() + static_cast<std::ptrdiff_t>(at),
                      all.begin() + static_cast<std::ptrdiff_t>(at + iters));
      at += iters;
    }
  std::vector<std::pair<std::size_t, double>> samples;
  for (std::size_t i = 0; i < std::size(kLadder); ++i) {
    samples.emplace_back(kLadder[i], calib::robust_median(times[i]));
    COMM_DEBUG("calibration: " << to_string(kind) << " exchange of " << kLadder[i] << " B: " << samples.back().second
                               << " us");
  }
  const LinkFit fit = fit_link(samples);
  const auto t1 = Clock::now();
  // 0: moved by copies, derived from the host's copy rates once they are measured.
  double beta_large = 0;
  if (!moved_by_copies(kind)) {
    const double streamed = calib::robust_median({all.begin() + static_cast<std::ptrdiff_t>(at), all.end()});
    const double handshake = kLargeBytes > fit.rndv_threshold_bytes ? fit.rndv_extra_us : 0.0;
    const double big_us = std::max(streamed - fit.alpha_us - handshake, 1e-3);
    beta_large = std::min(static_cast<double>(kLargeBytes) / (big_us * 1e3), fit.beta_gbps);
  }
  const auto t2 = Clock::now();
  // Overlapped, the pair costs about max(exchange, reduce); through our own CPU, their sum.
  const calib::Overlap ov =
      calib::overlap_us(t, scratch, peer, kLargeBytes, kOverlapIters, tag_of(kind_index, n++), timeout);
  const double exchange = samples.back().second;
  const bool receiver_copies = ov.both_us > std::max(exchange, ov.reduce_us) + 0.5 * std::min(exchange, ov.reduce_us);
  COMM_DEBUG("calibration: " << to_string(kind) << " 1 MiB exchange " << exchange << " us, reduce " << ov.reduce_us
                             << " us, both at once " << ov.both_us << " us; took " << calib::micros(t1 - t0) / 1e3
                             << " ms (ladder, streamed) + " << calib::micros(Clock::now() - t2) / 1e3
                             << " ms (overlap)");
  std::vector<double> values{fit.alpha_us,   fit.beta_gbps, static_cast<double>(fit.rndv_threshold_bytes),
                             fit.rndv_extra_us, beta_large,   receiver_copies ? 1.0 : 0.0,
                             samples.front().second};
  for (const auto& point : transfer_curve(samples, fit)) values.push_back(point.second);
  return values;
}

void apply_kind(LinkMatrix& links, LinkKind kind, const std::vector<double>& v, int a, int b, int rank) {
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
      link.transfer_curve.clear();
      for (std::size_t i = 0; i < std::size(kLadder); ++i)
        link.transfer_curve.emplace_back(kLadder[i], v[kKindFigures + i]);
      if (link.detail.find("calibrated") == std::string::npos)
        link.detail += link.detail.empty() ? "calibrated" : ", calibrated";
    }
  COMM_INFO("calibration: " << to_string(kind) << " links alpha " << alpha << " us, beta " << beta << " GB/s, "
                            << (threshold == std::numeric_limits<std::size_t>::max()
                                    ? std::string("no rendezvous step")
                                    : "rendezvous above " + std::to_string(threshold) + " B: +" +
                                          std::to_string(extra) + " us")
                            << (beta_large > 0 ? ", large-data beta " + std::to_string(beta_large) + " GB/s"
                                               : std::string(", from memory as the host's memcpy"))
                            << (v[5] != 0 ? ", moved by the receiver's CPU" : "") << " (ranks " << a << "-" << b
                            << ")");
}

// The kind every ring link r -> r+1 has, or self if they differ.
LinkKind ring_kind(const LinkMatrix& links) {
  const LinkKind k = links.at(0, 1 % links.n).kind;
  for (int r = 0; r < links.n; ++r)
    if (links.at(r, (r + 1) % links.n).kind != k) return LinkKind::self;
  return k;
}

// With every rank exchanging at once (a ring: send right, receive from the
// left), what one small message costs beyond the pair measured alone. Where
// ranks outnumber cores, spinning ranks take turns on a core and each message
// waits for its peer to be scheduled: that wait is per message, so it joins
// alpha. Collective over all ranks.
void measure_contention(Transport& t, Store& store, calib::Scratch& scratch, int rank, int size, LinkMatrix& links,
                        double pair_small_us, std::chrono::milliseconds timeout) {
  const LinkKind kind = ring_kind(links);
  if (size < 3 || kind == LinkKind::self) return;
  calib::ExchangeBuffers buf(scratch, kLadder[0], 1);
  auto times = calib::exchange_times(t, (rank + 1) % size, (rank + size - 1) % size, kLadder[0], buf, 1, 0,
                                     kContentionWarmup + kContentionIters, tag_of(std::size(kAllLinkKinds), 0),
                                     timeout);
  times.erase(times.begin(), times.begin() + kContentionWarmup);
  store.set("calibration/contention/" + std::to_string(rank), calib::encode({calib::robust_median(times)}));
  std::vector<double> medians;
  for (int r = 0; r < size; ++r) {
    const std::string key = "calibration/contention/" + std::to_string(r);
    medians.push_back(calib::decode(store.get(key, timeout), key, 1)[0]);
  }
  const double all = calib::robust_median(medians);
  const double extra = all - pair_small_us;
  // Below this it is the ring's extra port traffic, not waiting for a core.
  if (extra <= std::max(0.5, 0.25 * pair_small_us)) return;
  for (auto& link : links.links)
    if (link.kind == kind) link.alpha_us += extra;
  COMM_INFO("calibration: with all " << size << " ranks exchanging at once a small message takes " << all
                                     << " us instead of " << pair_small_us << " us (ranks outnumber cores?): "
                                     << extra << " us added to every " << to_string(kind) << " link's alpha");
}

// Every rank measures at once (ranks on one host share cores and memory, as
// in a collective); the slowest rank's figures are kept, because the
// slowest rank finishes a collective last.
void calibrate_compute(Store& store, calib::Scratch& scratch, int rank, int size, int ranks_here,
                       ComputeParams& compute, std::chrono::milliseconds timeout) {
  const std::size_t windows =
      std::max(kMinBigWindows, kBigWindows / static_cast<std::size_t>(std::max(1, ranks_here / 2)));
  const auto t0 = Clock::now();
  const calib::Throughput mine = calib::measure_compute(scratch, kLargeBytes, 1, kComputeIters);
  const calib::Throughput mine_large = calib::measure_compute(scratch, kLargeBytes, windows, 1);
  store.set("calibration/compute/" + std::to_string(rank),
            calib::encode({mine.reduce_gbps, mine.copy_gbps, mine_large.reduce_gbps, mine_large.copy_gbps}));
  // Parsed values only (not `mine`), so every rank takes the min of identical numbers.
  std::vector<double> slowest(4, std::numeric_limits<double>::infinity());
  for (int r = 0; r < size; ++r) {
    const std::string key = "calibration/compute/" + std::to_string(r);
    const std::vector<double> v = calib::decode(store.get(key, timeout), key, 4);
    for (std::size_t i = 0; i < 4; ++i) slowest[i] = std::min(slowest[i], v[i]);
  }
  compute.reduce_gbps = slowest[0];
  compute.copy_gbps = slowest[1];
  // Memory is never faster than cache; a noisy sample must not say otherwise.
  compute.reduce_large_gbps = std::min(slowest[2], slowest[0]);
  compute.copy_large_gbps = std::min(slowest[3], slowest[1]);
  compute.cache_bytes = kCacheBytes;
  COMM_DEBUG("calibration: compute took " << calib::micros(Clock::now() - t0) / 1e3 << " ms");
  COMM_INFO("calibration: reduce " << compute.reduce_gbps << " GB/s (" << compute.reduce_large_gbps
                                   << " from memory), copy " << compute.copy_gbps << " GB/s ("
                                   << compute.copy_large_gbps << " from memory)");
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

std::vector<std::pair<std::size_t, double>> transfer_curve(const std::vector<std::pair<std::size_t, double>>& samples,
                                                           const LinkFit& fit) {
  // Pooled adjacent violators: blocks of (mean, count), merged while a block's
  // mean is below the one before it.
  std::vector<std::pair<double, std::size_t>> blocks;
  for (const auto& [bytes, us] : samples) {
    blocks.emplace_back(us - fit.alpha_us - (bytes > fit.rndv_threshold_bytes ? fit.rndv_extra_us : 0.0), 1);
    while (blocks.size() > 1 && blocks.back().first < blocks[blocks.size() - 2].first) {
      const auto [mean, count] = blocks.back();
      blocks.pop_back();
      auto& prev = blocks.back();
      prev.first = (prev.first * static_cast<double>(prev.second) + mean * static_cast<double>(count)) /
                   static_cast<double>(prev.second + count);
      prev.second += count;
    }
  }
  std::vector<std::pair<std::size_t, double>> curve;
  for (const auto& [mean, count] : blocks)
    for (std::size_t i = 0; i < count; ++i) curve.emplace_back(samples[curve.size()].first, std::max(mean, 0.0));
  return curve;
}

void calibrate_links(Transport& transport, Store& store, calib::Scratch& scratch, int rank, int size, int ranks_here,
                     LinkMatrix& links, ComputeParams& compute, std::chrono::milliseconds timeout) {
  if (links.n != size)
    throw Error(ErrorCode::internal, "calibration: link matrix for " + std::to_string(links.n) + " ranks, group has " +
                                         std::to_string(size));
  if (const TransportCaps caps = transport.caps(); caps.stream_ordered || !caps.host_memory)
    throw Error(ErrorCode::unsupported,
                "calibration: transport '" + std::string(transport.name()) +
                    "' does not send host memory from the host (stream-ordered); calibration measures host "
                    "transports only: set COMM_CALIBRATE=0 for it");
  double ring_pair_small_us = 0;
  const LinkKind ring = size > 2 ? ring_kind(links) : LinkKind::self;
  for (std::size_t k = 0; k < std::size(kAllLinkKinds); ++k) {
    const LinkKind kind = kAllLinkKinds[k];
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
      const std::vector<double> v = measure_kind(transport, store, scratch, rank, rank == a ? b : a, k, kind, timeout);
      if (rank == a) store.set(key, calib::encode(v));
    }
    // Everyone (the pair included) waits for the published result, which also
    // keeps the next kind's pair from starting while this one measures.
    const std::vector<double> v = calib::decode(store.get(key, timeout), key, kKindValues);
    apply_kind(links, kind, v, a, b, rank);
    if (kind == ring) ring_pair_small_us = v[6];
  }
  measure_contention(transport, store, scratch, rank, size, links, ring_pair_small_us, timeout);
  calibrate_compute(store, scratch, rank, size, ranks_here, compute, timeout);
  // Links moved by copies, measured above with no streamed exchange (beta_large 0).
  const double copy_slowdown = compute.copy_large_gbps / compute.copy_gbps;
  bool said = false;
  for (auto& link : links.links)
    if (moved_by_copies(link.kind) && link.beta_large_gbps == 0) {
      link.beta_large_gbps = link.beta_gbps * copy_slowdown;
      if (!std::exchange(said, true))
        COMM_INFO("calibration: " << to_string(link.kind) << " links' large-data beta " << link.beta_large_gbps
                                  << " GB/s (beta times the host's from-memory / in-cache copy rate, "
                                  << copy_slowdown << ")");
    }
}

}  // namespace comm
