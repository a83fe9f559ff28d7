#pragma once
// Measurement primitives of start-up calibration (calibration.cpp,
// calibration_native.cpp): robust statistics, the exchange every collective
// step is made of, host compute rates, and passing numbers through the store.

#include <comm/store.hpp>
#include <comm/transport.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace comm::calib {

using Clock = std::chrono::steady_clock;

// The memory calibration measures in: the link exchanges, the compute rates
// and the algorithm timing (core/algorithm_timing.cpp) all use two lanes of
// one reservation, and each page is faulted once, in bulk
// (MADV_POPULATE_WRITE; page by page where the kernel lacks it), when a
// measurement first asks for it. Each measurement allocating and filling its
// own buffers faulted about 150 MiB in all on 2 ranks, 40-60 ms of a 0.3 s
// calibration (a 36 MiB allocation took 14-18 ms here, its bulk fault 9);
// here at most the two lanes are. What the lanes hold is whatever an
// earlier measurement left there: zeros at first, then sums of zeros, never
// a denormal or NaN that would slow a reduce.
class Scratch {
 public:
  static constexpr std::size_t kLaneBytes = std::size_t{32} << 20;
  static constexpr int kLanes = 2;
  Scratch();  // reserves the lanes' address space; faults nothing
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  // `bytes` at `offset` into lane `lane`, every page faulted. Throws internal
  // beyond the lane.
  std::byte* lane(int lane, std::size_t bytes, std::size_t offset = 0);
  float* floats(int lane, std::size_t count, std::size_t offset_floats = 0) {
    return reinterpret_cast<float*>(this->lane(lane, count * sizeof(float), offset_floats * sizeof(float)));
  }

 private:
  static constexpr std::size_t kBlock = std::size_t{64} << 10;  // faulted or not, as a unit
  std::byte* base_ = nullptr;
  std::vector<bool> faulted_;  // per kBlock of both lanes
};

inline double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// The median of the samples inside Tukey's fences (1.5 interquartile ranges
// beyond the quartiles): a preempted iteration on a busy machine is dropped
// instead of dragging the figure, while a quiet machine's spread is kept.
// `v` must not be empty.
double robust_median(std::vector<double> v);

// Drives `t` until every completion is done, through the communicator's own
// progress loop (engine/progress.hpp), so the measured latency is the one
// collectives see.
// poll_only: never sleep in t.wait(), only yield the core (warm-up). Throws timeout naming `peer`.
void wait_all(Transport& t, std::initializer_list<Completion*> cs, int peer, Clock::time_point deadline,
              std::chrono::milliseconds timeout, bool poll_only);

// Times (µs) of `iters` exchanges of `bytes`: this rank receives from `from`
// and sends to `to` at once and waits for both (from == to: both directions
// of one link, the step every collective schedule is made of). Successive
// exchanges use successive windows of `buffers` (bytes * windows each way),
// so windows > 1 streams the data from memory. `warmup` untimed exchanges
// poll without sleeping first: right after creation two ranks that both
// sleep between messages can settle into a wake-up per message, which is not
// what a running job sees. isolated: an untimed empty exchange precedes each
// one (as a barrier precedes each timed collective), so no exchange overlaps
// the previous one's tail (Gloo's rendezvous hides a whole latency when they do).
struct ExchangeBuffers {
  std::byte* out;  // lane 0
  std::byte* in;   // lane 1
  ExchangeBuffers(Scratch& scratch, std::size_t bytes, std::size_t windows)
      : out(scratch.lane(0, bytes * windows)), in(scratch.lane(1, bytes * windows)) {}
};
std::vector<double> exchange_times(Transport& t, int to, int from, std::size_t bytes, ExchangeBuffers& buffers,
                                   std::size_t windows, int warmup, int iters, std::uint64_t tag,
                                   std::chrono::milliseconds timeout, bool isolated = false);

// Elementwise maximum of this rank's and `peer`'s `times` (the same
// iterations, in the same order), through the store under `key`: a collective
// lasts until its slower rank is done, and the slower of two noisy ranks is
// slower than either alone.
std::vector<double> slower_of_pair(Store& store, const std::string& key, int rank, int peer,
                                   const std::vector<double>& times, std::chrono::milliseconds timeout);

// Robust-median times (µs) of a reduce of `bytes` alone and of an exchange
// of `bytes` with `peer` while the same reduce runs: whether the link's data
// moves while this rank computes (a NIC, a peer's copy) or only through this
// rank's CPU and progress calls (shared memory, loopback sockets).
struct Overlap {
  double reduce_us = 0;
  double both_us = 0;
};
Overlap overlap_us(Transport& t, Scratch& scratch, int peer, std::size_t bytes, int iters, std::uint64_t tag,
                   std::chrono::milliseconds timeout);

// Host f32 sum and memcpy of `piece`-byte pieces, each run through a
// different one of `windows` windows (1: in cache; many: from memory).
struct Throughput {
  double reduce_gbps = 0;
  double copy_gbps = 0;
};
Throughput measure_compute(Scratch& scratch, std::size_t piece, std::size_t windows, int iters);

// Numbers through the store (full precision, space separated).
std::string encode(const std::vector<double>& values);
std::vector<double> decode(const std::string& text, const std::string& key, std::size_t n);

}  // namespace comm::calib
