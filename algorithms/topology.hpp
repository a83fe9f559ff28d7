#pragma once
// Index arithmetic shared by every algorithm: block partitions, pipeline
// chunks, ring neighbours, tree shapes and tag packing. It lives in one place
// so that all algorithms split data and number messages the same way, and a
// fix here fixes every schedule at once.

#include <comm/error.hpp>
#include <comm/schedule.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace comm::algo {

// Tags carried by schedules are below 2^kScheduleTagBits (schedule.hpp); the
// core puts the operation's kind, signature and sequence number above them.
inline constexpr std::size_t kTagLimit = std::size_t{1} << kScheduleTagBits;

// A pipeline never cuts a block into more chunks than this. Beyond ~100
// chunks the overlap gain is negligible, while schedules (and the cost
// model's simulation work) grow linearly with the chunk count; a tiny
// Config::chunk_bytes therefore still gives deep, but bounded, pipelines.
inline constexpr std::size_t kMaxChunks = 128;

// Marks "no such step" in per-block / per-chunk step tables.
inline constexpr StepId kNoStep = ~StepId{0};

inline int mod(long long a, int n) {
  const long long m = a % n;
  return static_cast<int>(m < 0 ? m + n : m);
}

// Position of `rank` in a numbering that starts at `root`, and back.
inline int relative(int rank, int root, int n) { return mod(static_cast<long long>(rank) - root, n); }
inline int absolute(int rel, int root, int n) { return mod(static_cast<long long>(rel) + root, n); }

inline std::uint32_t checked_tag(std::size_t value) {
  if (value >= kTagLimit)
    throw Error(ErrorCode::internal, "algorithm tag " + std::to_string(value) +
                                         " does not fit in the schedule's tag bits; this is a bug in comm's chunk planning");
  return static_cast<std::uint32_t>(value);
}

// `count` elements split into `parts` blocks whose sizes differ by at most
// one: the first count % parts blocks hold one element more.
struct Partition {
  std::size_t count = 0;
  std::size_t parts = 1;
  std::size_t size(std::size_t i) const { return count / parts + (i < count % parts ? 1 : 0); }
  std::size_t offset(std::size_t i) const { return i * (count / parts) + std::min(i, count % parts); }
};

// The chunks a block is pipelined in. Every block of a schedule uses the same
// chunk length, so chunk c of a block means the same element range on every
// rank and tag arithmetic (base + step * chunks + c) stays collision-free.
struct Chunking {
  std::size_t chunk = 1;   // elements per chunk (the last chunk of a block may be shorter)
  std::size_t chunks = 0;  // chunks in the longest block; chunk indices are < chunks

  std::size_t begin(std::size_t c) const { return c * chunk; }
  // Elements of chunk c of a block of `block_len` elements (0 past its end).
  std::size_t len(std::size_t block_len, std::size_t c) const {
    const std::size_t b = c * chunk;
    return b >= block_len ? 0 : std::min(chunk, block_len - b);
  }
};

// Chunks for blocks of at most `max_len` elements with a requested chunk of
// `chunk_elems`. `tag_ranges` is how many (step, chunk) tag ranges one peer
// sees, so that tag_ranges * chunks stays below kTagLimit.
inline Chunking plan_chunks(std::size_t max_len, std::size_t chunk_elems, std::size_t tag_ranges) {
  if (max_len == 0) return {1, 0};
  const std::size_t want_chunk = std::max<std::size_t>(chunk_elems, 1);
  const std::size_t wanted = max_len / want_chunk + (max_len % want_chunk != 0 ? 1 : 0);
  const std::size_t by_tags = std::max<std::size_t>(1, kTagLimit / std::max<std::size_t>(tag_ranges, 1));
  const std::size_t k = std::min({wanted, kMaxChunks, by_tags});
  const std::size_t chunk = (max_len + k - 1) / k;
  return {chunk, (max_len + chunk - 1) / chunk};
}

// ---- trees --------------------------------------------------------------

// Binary "heap" tree over positions 0..n-1 rooted at 0: children 2v+1, 2v+2.
inline int heap_parent(int v) { return (v - 1) / 2; }
inline std::vector<int> heap_children(int v, int n) {
  std::vector<int> c;
  for (int k = 1; k <= 2; ++k)
    if (2 * v + k < n) c.push_back(2 * v + k);
  return c;
}

// Binomial tree over positions 0..n-1 rooted at 0: the parent of v clears
// v's lowest set bit; the children of v are v + 2^k for every 2^k below v's
// lowest set bit (every 2^k < n for the root). Child v + 2^k heads the
// positions [v + 2^k, v + 2^(k+1)), so children in increasing order cover
// increasing, contiguous position ranges.
inline int binomial_parent(int v) { return v & (v - 1); }
inline std::vector<int> binomial_children(int v, int n) {
  std::vector<int> c;
  const long long low = v == 0 ? (1LL << 62) : (v & -v);
  for (long long d = 1; d < low && v + d < n; d <<= 1) c.push_back(static_cast<int>(v + d));
  return c;
}

// ---- regions --------------------------------------------------------------

inline Region in_region(std::size_t off, std::size_t n) { return {BufferId::input, off, n}; }
inline Region out_region(std::size_t off, std::size_t n) { return {BufferId::output, off, n}; }
inline Region scratch_region(std::size_t off, std::size_t n) { return {BufferId::scratch, off, n}; }
inline Region sub(Region r, std::size_t off, std::size_t n) { return {r.buffer, r.offset + off, n}; }

// Dependency list without the kNoStep placeholders. Almost every step has at
// most a few dependencies, so they live inline; longer lists move to the heap.
class Deps {
 public:
  Deps() = default;
  Deps(std::initializer_list<StepId> ids) {
    for (StepId s : ids) add(s);
  }
  void add(StepId s) {
    if (s == kNoStep) return;
    if (heap_.empty() && size_ < inline_.size()) {
      inline_[size_++] = s;
      return;
    }
    if (heap_.empty()) heap_.assign(inline_.begin(), inline_.begin() + static_cast<std::ptrdiff_t>(size_));
    heap_.push_back(s);
  }
  operator std::span<const StepId>() const {
    if (heap_.empty()) return {inline_.data(), size_};
    return heap_;
  }

 private:
  std::array<StepId, 4> inline_{};
  std::size_t size_ = 0;
  std::vector<StepId> heap_;
};

}  // namespace comm::algo
