// tp_decode: a stand-in for tensor-parallel decode that really communicates.
//
// Each rank holds a 1/TP shard of every layer (TP = world size), the way
// Megatron-style tensor parallelism splits a decoder: the first matrix of a
// block is split by columns (no communication needed), the second by rows, so
// each rank ends a block with a partial sum of the full activation that an
// all-reduce completes. A decoder layer has two such blocks (attention, MLP),
// hence two all-reduces of batch x hidden elements per layer and token.
//
// The local work is real (a small CPU matrix multiply with bf16 data computed
// in f32) so that the share of time spent communicating is measured, not
// assumed. With --overlap the program runs every token twice over, blocking and
// overlapped, and prints what overlap hid.
//
// Run: commrun -n 2 --transport ucx build/bin/tp_decode --hidden 1024 --overlap

#include "util/cli.hpp"

#include <comm/comm.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// ---- element types: bf16 is the upper half of an f32 ----------------------

struct Bf16 {
  std::uint16_t bits;
};

float to_f32(float v) { return v; }
float to_f32(Bf16 v) { return std::bit_cast<float>(static_cast<std::uint32_t>(v.bits) << 16); }

template <class T>
T from_f32(float f);
template <>
float from_f32<float>(float f) { return f; }
template <>
Bf16 from_f32<Bf16>(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {0x7fc0};  // keep NaN a NaN
  u += 0x7fffu + ((u >> 16) & 1u);                         // round to nearest even
  return {static_cast<std::uint16_t>(u >> 16)};
}

template <class T>
constexpr comm::DataType kDtype = std::is_same_v<T, float> ? comm::DataType::f32 : comm::DataType::bf16;

// ---- deterministic weights --------------------------------------------------

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Weight (row, col) of matrix `m` of the full, unsharded model: a rank
// generates exactly its shard, and the result of the model does not depend on
// how many ranks share it (up to the rounding of the bf16 partial sums).
float weight(std::uint64_t m, std::uint64_t row, std::uint64_t col, std::size_t fan_in) {
  const std::uint64_t h = mix(mix(m) ^ (row << 24) ^ col);
  const double u = static_cast<double>(h >> 40) / static_cast<double>(1u << 24) * 2.0 - 1.0;
  return static_cast<float>(u * std::sqrt(3.0 / static_cast<double>(fan_in)));  // variance 1/fan_in
}

// ---- the model ---------------------------------------------------------------

struct Options {
  int layers = 4;
  std::size_t hidden = 1024;
  std::size_t batch = 1;
  int tokens = 32;
  int warmup = 3;
  std::string algo;  // "" = automatic selection
  bool overlap = false;
  std::size_t slices = 2;
};

struct TokenTimes {
  double total_us = 0;
  double comm_us = 0;      // blocking: inside allreduce; overlapped: test() + wait()
  double progress_us = 0;  // overlapped only: inside test() between compute slices
};

// One block (attention or MLP stand-in) of this rank's shard.
template <class T>
struct Block {
  std::vector<T> w_in;   // hidden x shard, split by columns
  std::vector<T> w_out;  // shard x hidden, split by rows
};

template <class T>
class Decoder {
 public:
  Decoder(comm::Communicator& comm, const Options& o) : comm_(comm), o_(o) {
    const auto tp = static_cast<std::size_t>(comm.size());
    shard_ = o.hidden / tp;
    const std::size_t col0 = shard_ * static_cast<std::size_t>(comm.rank());
    for (int l = 0; l < o.layers; ++l) {
      for (int b = 0; b < 2; ++b) {
        Block<T> blk;
        const auto id = static_cast<std::uint64_t>(l * 2 + b) * 2;
        blk.w_in.resize(o.hidden * shard_);
        for (std::size_t i = 0; i < o.hidden; ++i)
          for (std::size_t j = 0; j < shard_; ++j)
            blk.w_in[i * shard_ + j] = from_f32<T>(weight(id, i, col0 + j, o.hidden));
        blk.w_out.resize(shard_ * o.hidden);
        for (std::size_t k = 0; k < shard_; ++k)
          for (std::size_t j = 0; j < o.hidden; ++j)
            blk.w_out[k * o.hidden + j] = from_f32<T>(weight(id + 1, col0 + k, j, o.hidden));
        blocks_.push_back(std::move(blk));
      }
    }
    x_.assign(o.batch * o.hidden, 0.0f);
    for (std::size_t i = 0; i < x_.size(); ++i) x_[i] = weight(~0ull, i / o.hidden, i % o.hidden, 1);
    xn_.resize(x_.size());
    h_.resize(o.batch * shard_);
    partial_.resize(x_.size());
    opts_.algorithm = o.algo;
  }

  std::size_t message_bytes() const { return o_.batch * o_.hidden * sizeof(T); }
  // Output columns [slice_begin(s), slice_begin(s) + slice_width(s)) form slice s.
  std::size_t slice_begin(std::size_t s) const {
    return std::min(o_.hidden, s * ((o_.hidden + o_.slices - 1) / o_.slices));
  }
  std::size_t slice_width(std::size_t s) const { return slice_begin(s + 1) - slice_begin(s); }

  TokenTimes token(bool overlap) {
    TokenTimes t;
    const auto t0 = Clock::now();
    for (const Block<T>& blk : blocks_) {
      column_part(blk);
      if (overlap)
        row_part_overlapped(blk, t);
      else
        row_part_blocking(blk, t);
    }
    t.total_us = us_since(t0);
    return t;
  }

  /// FNV-1a over the bits of the residual stream: equal on every rank iff the
  /// all-reduces delivered identical results everywhere.
  std::uint64_t state_hash() const {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (float v : x_) {
      h ^= std::bit_cast<std::uint32_t>(v);
      h *= 0x100000001b3ull;
    }
    return h;
  }

 private:
  // xn = rmsnorm(x); h = relu(xn . w_in): no communication, the input is
  // replicated and w_in is split by columns.
  void column_part(const Block<T>& blk) {
    for (std::size_t b = 0; b < o_.batch; ++b) {
      const float* x = &x_[b * o_.hidden];
      double ss = 0;
      for (std::size_t i = 0; i < o_.hidden; ++i) ss += static_cast<double>(x[i]) * x[i];
      const auto inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(o_.hidden) + 1e-6));
      float* xn = &xn_[b * o_.hidden];
      for (std::size_t i = 0; i < o_.hidden; ++i) xn[i] = x[i] * inv;
      float* h = &h_[b * shard_];
      std::fill(h, h + shard_, 0.0f);
      for (std::size_t i = 0; i < o_.hidden; ++i) {
        const float xi = xn[i];
        const T* w = &blk.w_in[i * shard_];
        for (std::size_t j = 0; j < shard_; ++j) h[j] += xi * to_f32(w[j]);
      }
      for (std::size_t j = 0; j < shard_; ++j) h[j] = std::max(h[j], 0.0f);
    }
  }

  // out[b][j - c0] = sum_k h[b][k] w_out[k][j] for j in [c0, c1): the rank's
  // partial sum of output columns c0..c1. `poll` runs every few rows so that
  // in-flight operations progress while we compute.
  template <class Poll>
  void partial_columns(const Block<T>& blk, std::size_t c0, std::size_t c1, T* out, Poll&& poll) {
    const std::size_t w = c1 - c0;
    acc_.assign(o_.batch * w, 0.0f);
    constexpr std::size_t kRowsPerPoll = 16;
    for (std::size_t k = 0; k < shard_; ++k) {
      if (k % kRowsPerPoll == 0) poll();
      const T* wr = &blk.w_out[k * o_.hidden + c0];
      for (std::size_t b = 0; b < o_.batch; ++b) {
        const float hk = h_[b * shard_ + k];
        if (hk == 0.0f) continue;  // relu zeros: skipping is exact
        float* a = &acc_[b * w];
        for (std::size_t j = 0; j < w; ++j) a[j] += hk * to_f32(wr[j]);
      }
    }
    for (std::size_t i = 0; i < acc_.size(); ++i) out[i] = from_f32<T>(acc_[i]);
  }

  void row_part_blocking(const Block<T>& blk, TokenTimes& t) {
    partial_columns(blk, 0, o_.hidden, partial_.data(), [] {});
    const comm::View v{partial_.data(), partial_.size(), kDtype<T>};
    const auto c0 = Clock::now();
    comm_.allreduce(v, comm::ReduceOp::sum, opts_);
    t.comm_us += us_since(c0);
    for (std::size_t i = 0; i < x_.size(); ++i) x_[i] += to_f32(partial_[i]);
  }

  // The output columns are computed in slices; each slice's all-reduce starts
  // as soon as the slice is done and progresses (Work::test) while the next
  // slice is computed. Only the last slice's all-reduce has nothing left to
  // hide behind in this block: the next block needs the full result.
  void row_part_overlapped(const Block<T>& blk, TokenTimes& t) {
    std::vector<comm::Work> inflight;
    std::size_t oldest = 0;  // first Work not yet seen complete
    double progress_us = 0;
    auto poll = [&] {
      if (oldest == inflight.size()) return;
      const auto p0 = Clock::now();
      while (oldest < inflight.size() && inflight[oldest].test()) ++oldest;
      progress_us += us_since(p0);
    };
    std::size_t offset = 0;  // slices are stored one after another: each is contiguous
    for (std::size_t s = 0; s < o_.slices; ++s) {
      const std::size_t c0 = slice_begin(s);
      const std::size_t w = slice_width(s);
      if (w == 0) break;
      T* out = partial_.data() + offset;
      partial_columns(blk, c0, c0 + w, out, poll);
      inflight.push_back(comm_.iallreduce(comm::ConstView{out, o_.batch * w, kDtype<T>},
                                          comm::View{out, o_.batch * w, kDtype<T>}, comm::ReduceOp::sum, opts_));
      offset += o_.batch * w;
    }
    const auto w0 = Clock::now();
    for (std::size_t i = oldest; i < inflight.size(); ++i) inflight[i].wait();
    t.comm_us += us_since(w0) + progress_us;
    t.progress_us += progress_us;
    offset = 0;
    for (std::size_t s = 0; s < o_.slices; ++s) {
      const std::size_t c0 = slice_begin(s);
      const std::size_t w = slice_width(s);
      if (w == 0) break;
      for (std::size_t b = 0; b < o_.batch; ++b)
        for (std::size_t j = 0; j < w; ++j) x_[b * o_.hidden + c0 + j] += to_f32(partial_[offset + b * w + j]);
      offset += o_.batch * w;
    }
  }

  comm::Communicator& comm_;
  Options o_;
  std::size_t shard_ = 0;
  std::vector<Block<T>> blocks_;
  std::vector<float> x_, xn_, h_, acc_;
  std::vector<T> partial_;
  comm::CallOptions opts_;
};

// ---- measurement and report ---------------------------------------------------

// Medians, not means: one token delayed by the OS (or by a busy machine) must
// not decide what the report says.
struct Summary {
  double median_us = 0, p99_us = 0, comm_us = 0, progress_us = 0;
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Summary summarise(const std::vector<TokenTimes>& v) {
  std::vector<double> total, comm, progress;
  for (const auto& t : v) {
    total.push_back(t.total_us);
    comm.push_back(t.comm_us);
    progress.push_back(t.progress_us);
  }
  Summary s;
  s.median_us = median_of(total);
  s.comm_us = median_of(comm);
  s.progress_us = median_of(progress);
  // Nearest-rank p99: with few tokens this is the slowest one.
  std::sort(total.begin(), total.end());
  const auto idx = static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(total.size()))) - 1;
  s.p99_us = total[std::min(idx, total.size() - 1)];
  return s;
}

template <class T>
Summary run_mode(comm::Communicator& comm, Decoder<T>& d, const Options& o, bool overlap) {
  comm.barrier();  // start together, so no rank's wait includes another's set-up
  for (int i = 0; i < o.warmup; ++i) d.token(overlap);
  std::vector<TokenTimes> times;
  for (int i = 0; i < o.tokens; ++i) times.push_back(d.token(overlap));
  return summarise(times);
}

std::string human_bytes(std::size_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

template <class T>
int run(comm::Communicator& comm, const Options& o) {
  const bool root = comm.rank() == 0;
  Decoder<T> d(comm, o);
  if (root) {
    std::printf("tp_decode: TP=%d over '%s'", comm.size(), std::string(comm.transport_name()).c_str());
    if (comm.size() > 1) {
      const comm::LinkInfo l = comm.link(0, 1);
      std::printf(" (link 0->1: %s, alpha %.2f us, beta %.2f GB/s, %s)", std::string(comm::to_string(l.kind)).c_str(),
                  l.alpha_us, l.beta_gbps, l.detail.c_str());
    }
    std::printf("\nmodel: %d layers, hidden %zu, batch %zu, %s; 2 all-reduces of %s per layer; "
                "local matmuls 4 x (%zu x %zu) per layer\n",
                o.layers, o.hidden, o.batch, std::string(comm::to_string(kDtype<T>)).c_str(),
                human_bytes(d.message_bytes()).c_str(), o.hidden, o.hidden / static_cast<std::size_t>(comm.size()));
    std::printf("algorithm per message size (Communicator::algorithm_for%s%s%s):\n",
                o.algo.empty() ? "" : "; overridden by --algo for this run: '", o.algo.c_str(),
                o.algo.empty() ? "" : "'");
    std::vector<std::size_t> sizes{d.message_bytes()};
    if (o.overlap)
      for (std::size_t s = 0; s < o.slices; ++s) sizes.push_back(o.batch * d.slice_width(s) * sizeof(T));
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    for (std::size_t b : sizes)
      std::printf("  %10s  %-20s%s\n", human_bytes(b).c_str(),
                  comm.algorithm_for(comm::Collective::allreduce, b).c_str(),
                  b == d.message_bytes() ? "(blocking all-reduce)" : "(overlap slice)");
  }

  const Summary blocking = run_mode(comm, d, o, false);
  if (root)
    std::printf("blocking:   token latency median %9.1f us  p99 %9.1f us; communication %8.1f us/token (%.1f %%)\n",
                blocking.median_us, blocking.p99_us, blocking.comm_us, 100.0 * blocking.comm_us / blocking.median_us);
  if (o.overlap) {
    const Summary ov = run_mode(comm, d, o, true);
    if (root) {
      std::printf("overlapped: token latency median %9.1f us  p99 %9.1f us; exposed communication %8.1f us/token "
                  "(%.1f %%: %.1f in wait, %.1f progressing in test)\n",
                  ov.median_us, ov.p99_us, ov.comm_us, 100.0 * ov.comm_us / ov.median_us, ov.comm_us - ov.progress_us,
                  ov.progress_us);
      // What overlap took off the critical path is the communication that is
      // no longer exposed; the token latency also moves with compute noise.
      const double hidden = blocking.comm_us - ov.comm_us;
      std::printf("overlap hid %.1f of %.1f us of communication per token (%.0f %%); token latency %+.1f us\n", hidden,
                  blocking.comm_us, blocking.comm_us > 0 ? 100.0 * hidden / blocking.comm_us : 0.0,
                  ov.median_us - blocking.median_us);
      std::printf("  what it cannot hide: the last slice of every block (the next block needs the whole sum),\n"
                  "  the extra per-message latency of %zu smaller all-reduces, and progress work done in test()\n",
                  o.slices);
    }
  }

  // The ranks must hold bit-identical activations; check it over the communicator itself.
  std::vector<std::int64_t> mine{static_cast<std::int64_t>(d.state_hash())};
  std::vector<std::int64_t> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(comm::view(mine), comm::view(all));
  const bool agree = std::all_of(all.begin(), all.end(), [&](std::int64_t h) { return h == all[0]; });
  if (root)
    std::printf("ranks agree on the output: %s (state hash 0x%016llx)\n", agree ? "yes" : "NO",
                static_cast<unsigned long long>(all[0]));
  return agree ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string algo = "auto", dtype = "bf16", transport;
  comm::cli::Parser args("tp_decode", "commrun -n N tp_decode [options]");
  args.description("Tensor-parallel decode stand-in; TP degree = world size (run under commrun).\n"
                   "Configuration (rank, store, transport, ...) comes from the COMM_* environment.");
  args.integer("--layers", "N", "decoder layers (default 4)", o.layers, 1);
  args.integer("--hidden", "N", "model width (default 1024)", o.hidden, 1);
  args.integer("--batch", "N", "sequences decoded together (default 1)", o.batch, 1);
  args.text("--dtype", "bf16|f32", "activation type (default bf16)", dtype);
  args.integer("--tokens", "N", "measured tokens (default 32)", o.tokens, 1);
  args.integer("--warmup", "N", "unmeasured tokens first (default 3)", o.warmup, 0);
  args.text("--transport", "NAME", "overrides COMM_TRANSPORT", transport);
  args.text("--algo", "NAME|auto", "all-reduce algorithm or auto (default)", algo);
  args.flag("--overlap", "also run with non-blocking all-reduces overlapped with compute", o.overlap);
  args.integer("--slices", "N", "output slices per block when overlapping (default 2)", o.slices, 1);
  args.parse_or_exit(argc, argv);
  o.algo = algo == "auto" ? "" : algo;
  if (o.slices > o.hidden) args.fail("--slices must not exceed --hidden");

  try {
    comm::Config cfg = comm::Config::from_env();
    if (!transport.empty()) cfg.transport = transport;
    comm::Communicator world = comm::Communicator::create(cfg);
    if (o.hidden % static_cast<std::size_t>(world.size()) != 0)
      args.fail("--hidden " + std::to_string(o.hidden) + " is not divisible by the TP degree " +
                std::to_string(world.size()) + " (the world size)");
    switch (comm::parse_dtype(dtype)) {
      case comm::DataType::bf16: return run<Bf16>(world, o);
      case comm::DataType::f32: return run<float>(world, o);
      case comm::DataType::f64:
      case comm::DataType::f16:
      case comm::DataType::i8:
      case comm::DataType::u8:
      case comm::DataType::i32:
      case comm::DataType::i64: break;
    }
    args.fail("--dtype " + dtype + ": tp_decode computes in bf16 or f32");
  } catch (const comm::Error& e) {
    std::fprintf(stderr, "tp_decode: %s\n", e.what());
    return 1;
  }
}
