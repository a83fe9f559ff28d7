#pragma once
// comm-bench arithmetic: the benchmarked collectives, nccl-tests' bus
// bandwidth factors, buffer layouts per message size, the size sweep,
// iteration scaling, and order statistics.

#include <comm/types.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace comm::bench {

// What comm-bench can run. sendrecv is a 2-rank ping-pong (ranks 0 and 1).
enum class BenchColl { allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall, sendrecv };

inline constexpr BenchColl kAllBenchColls[] = {BenchColl::allreduce, BenchColl::reduce_scatter,
                                               BenchColl::allgather, BenchColl::broadcast,
                                               BenchColl::reduce,    BenchColl::alltoall,
                                               BenchColl::sendrecv};

std::string_view to_string(BenchColl c) noexcept;
// Accepts the to_string names plus all_to_all, all-reduce style dashes and p2p.
// Throws comm::Error(invalid_argument) listing the valid names.
BenchColl parse_bench_coll(std::string_view name);
// The library collective behind `c` (sendrecv: Collective::send).
Collective to_collective(BenchColl c) noexcept;
// True for the collectives that take a reduction operator.
bool has_reduce_op(BenchColl c) noexcept;
bool has_root(BenchColl c) noexcept;

// nccl-tests' busbw = algbw * factor: allreduce 2(n-1)/n; reduce_scatter,
// allgather, alltoall (n-1)/n; broadcast, reduce, sendrecv 1.
double busbw_factor(BenchColl c, int nranks) noexcept;

// Buffers of one size point. `bytes` is the message size as nccl-tests and
// the selector count it: the larger of the per-rank input and output buffers
// (reduce_scatter: whole input, allgather: whole output). Requested sizes are
// rounded down to whole elements and, where the buffer is split into one
// block per rank, to a multiple of nranks elements.
struct Layout {
  std::size_t bytes = 0;      // actual message size after rounding
  std::size_t count = 0;      // elements in `bytes`
  std::size_t in_count = 0;   // elements of this rank's input buffer
  std::size_t out_count = 0;  // elements of this rank's output buffer
  std::size_t block = 0;      // per-rank block (reduce_scatter/allgather/alltoall), else count
};
Layout make_layout(BenchColl c, std::size_t requested_bytes, std::size_t elem_size, int nranks) noexcept;

// min, min*f, min*f^2, ... below max, then max itself (so -e is always measured).
// factor must be > 1 (checked by option parsing); min <= max.
std::vector<std::size_t> size_sweep(std::size_t min_bytes, std::size_t max_bytes, double factor);
// min, min+step, min+2 step, ... below max, then max (-i).
std::vector<std::size_t> size_sweep_linear(std::size_t min_bytes, std::size_t max_bytes, std::size_t step);

// Iterations at `bytes`: `iters` up to 4 MiB, scaled down in proportion
// above (at least min(iters, 10)), so big sweeps stay short. Warm-up likewise,
// at least 1 when warmup > 0.
int scaled_iters(int iters, std::size_t bytes) noexcept;
int scaled_warmup(int warmup, std::size_t bytes) noexcept;
// Warm-up calls to add after `warm` of them took `took_us`, so that the
// warm-up lasts kMinWarmupUs at their pace (at most kMaxWarmupCalls); none
// when `warm` is 0 (-w 0) or no time passed. A direct-memory algorithm's data
// moves through its whole window call by call, so after another algorithm's
// calls a few of its own leave it where the other left the caches (shm,
// mem_twoshot at 128 KiB: 15.8 us in rounds with two warm-up calls a turn,
// 10.1 with a millisecond, 8.9-12.2 alone back to back).
inline constexpr double kMinWarmupUs = 1000;
inline constexpr std::int64_t kMaxWarmupCalls = 5000;
std::int64_t warmup_top_up(int warm, double took_us) noexcept;

// Order statistics; an empty input gives NaN. percentile(p) interpolates
// linearly between closest ranks, p in [0, 100].
double median(std::vector<double> v);
double percentile(std::vector<double> v, double p);

// GB/s (1e9 B/s) for `bytes` moved in `us` microseconds; 0 when us <= 0.
double gbps(std::size_t bytes, double us) noexcept;

}  // namespace comm::bench
