#pragma once
// Direct-memory algorithms (comm/direct.hpp): each is a pure function from
// (collective, rank, group size, sizes, window size) to that rank's program,
// one file per algorithm beside this header. Like the schedule algorithms they
// never see a buffer address, a dtype or an op; unlike them they name windows
// and flags instead of peers and tags.
//
// Chunking: data larger than a window is cut into chunks; chunk k lives in
// section k % kSections of the call's window slot. A rank publishes chunk k+1
// before it consumes chunk k (so publishing and reducing overlap across
// ranks), which is why three sections are needed: section (k+1) % 3 last held
// chunk k-2, which every reader finished before it published chunk k, and a
// rank waits for every peer's "published k" before it writes chunk k+1.

#include <comm/direct.hpp>

#include <algorithm>
#include <comm/types.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace comm::direct {

inline constexpr unsigned kSections = 3;
// Chunks of pipelined algorithms stay this small even in a large window, so
// that a chunk is still in cache when the other ranks read it.
inline constexpr std::size_t kPipelineSection = std::size_t{256} << 10;

struct DirectArgs {
  Collective collective = Collective::allreduce;
  int rank = 0;
  int nranks = 1;
  std::size_t count = 0;         // elements, algorithms/algorithm.hpp AlgoArgs::count convention
  std::size_t elem_size = 4;
  int root = 0;
  std::size_t window_bytes = 0;  // one window slot, flag word included
  bool peer_reads = false;       // DirectMemory::peer_reads() is offered (DirectSpace::peer_input/peer_output)
};

struct DirectAlgorithm {
  std::string_view name;  // user-visible id, e.g. "mem_oneshot"
  Collective collective;
  void (*build)(const DirectArgs& args, class ProgramBuilder& out);
  // nullptr: eligible whenever the chunk layout fits (see chunk_layout); else e.g. "fits one window".
  bool (*eligible)(const DirectArgs& args);
  std::string_view summary;
  bool reads_peers = false;  // its programs read peers' buffers: runs only where DirectArgs::peer_reads
};

std::span<const DirectAlgorithm> all_direct_algorithms();
const DirectAlgorithm* find_direct_algorithm(Collective c, std::string_view name);

// Where a chunked algorithm puts its data: `per_chunk` elements of each of
// `pieces` pieces per chunk, `chunks` chunks (the last may be shorter).
struct ChunkLayout {
  std::size_t per_chunk = 0;    // elements of one piece in a full chunk
  std::size_t chunks = 0;       // at least 1
  std::size_t data_offset = 0;  // bytes from the slot start to section 0
  std::size_t section_bytes = 0;
};
// Splits `count` elements (times `pieces` pieces published together) over the
// sections of a window of `window_bytes`. Tiny totals sit right after the
// flag word (one cache line carries flag, data and the call's signature);
// larger ones start on the next line.
// `max_section` caps a section (kPipelineSection for the pipelined algorithms).
ChunkLayout chunk_layout(std::size_t count, std::size_t pieces, std::size_t elem_size, std::size_t window_bytes,
                         std::size_t max_section = kPipelineSection);
// The chunks of one call: element ranges and the section each lives in.
struct Chunks {
  ChunkLayout layout;
  std::size_t count = 0;
  std::size_t elem = 4;
  Chunks(std::size_t count_, std::size_t pieces, std::size_t elem_, std::size_t window_bytes)
      : layout(chunk_layout(count_, pieces, elem_, window_bytes)), count(count_), elem(elem_) {}
  Chunks(const ChunkLayout& l, std::size_t count_, std::size_t elem_) : layout(l), count(count_), elem(elem_) {}
  std::size_t size() const { return layout.chunks; }
  std::size_t begin(std::size_t k) const { return k * layout.per_chunk; }
  std::size_t len(std::size_t k) const { return std::min(layout.per_chunk, count - begin(k)); }
  // Bytes from the slot start to piece `piece` of chunk k.
  std::size_t at(std::size_t k, std::size_t piece) const {
    return layout.data_offset + (k % kSections) * layout.section_bytes + piece * layout.per_chunk * elem;
  }
};

// `count` elements in `parts` blocks differing by at most one (the first count % parts one longer).
inline std::size_t block_offset(std::size_t count, std::size_t parts, std::size_t i) {
  return i * (count / parts) + std::min(i, count % parts);
}
inline std::size_t block_size(std::size_t count, std::size_t parts, std::size_t i) {
  return count / parts + (i < count % parts ? 1 : 0);
}

// True when the layout fits the window and the step numbers fit kDirectStepBits.
bool chunks_fit(const DirectArgs& a, std::size_t pieces, unsigned steps_per_chunk);

// Appends operations to one rank's program; numbers signals 1, 2, ... in order.
class ProgramBuilder {
 public:
  ProgramBuilder(int rank, int nranks) : rank_(rank), nranks_(nranks) {}
  int rank() const noexcept { return rank_; }
  int nranks() const noexcept { return nranks_; }

  static DirectRef input(std::size_t offset) { return {DirectSpace::input, -1, offset}; }
  static DirectRef output(std::size_t offset) { return {DirectSpace::output, -1, offset}; }
  static DirectRef window(int owner, std::size_t offset) { return {DirectSpace::window, owner, offset}; }
  static DirectRef peer_input(int owner, std::size_t offset) { return {DirectSpace::peer_input, owner, offset}; }
  static DirectRef peer_output(int owner, std::size_t offset) { return {DirectSpace::peer_output, owner, offset}; }
  static DirectRef scratch(std::size_t offset) { return {DirectSpace::scratch, -1, offset}; }

  // Zero-byte copies and reductions are dropped. A peer_input/peer_output
  // source (another rank's buffer) is for copies only, into this rank's memory.
  void copy(DirectRef dst, DirectRef src, std::size_t bytes);
  void reduce(DirectRef dst, std::span<const DirectRef> srcs, std::size_t bytes, const DirectRef* dst2 = nullptr);
  // Issues the next signal; returns its step.
  std::uint32_t signal();
  void wait(int rank, std::uint32_t step);
  // Waits for `step` of every other rank.
  void wait_all(std::uint32_t step);
  DirectProgram finish() &&;

 private:
  void note_write(const DirectRef& r, std::size_t bytes);
  void check_ref(const DirectRef& r, bool as_copy_source) const;
  std::size_t lowest_window_write_ = static_cast<std::size_t>(-1);
  int rank_;
  int nranks_;
  DirectProgram p_;
};

// Publishes chunk k of every block of the input but this rank's (block p of
// an n-block input goes to piece p of section k), then signals; returns the step.
std::uint32_t publish_blocks(ProgramBuilder& b, const DirectArgs& a, const Chunks& c, std::size_t k);

// The pipeline of the algorithms in which everyone publishes: publish chunk 0;
// then for each chunk k, wait for every rank's chunk k, publish chunk k+1 (if
// any), consume chunk k. publish(k) returns its signal's step.
template <class Publish, class Consume>
void pipeline(ProgramBuilder& b, std::size_t chunks, Publish&& publish, Consume&& consume) {
  std::uint32_t published = publish(std::size_t{0});
  for (std::size_t k = 0; k < chunks; ++k) {
    b.wait_all(published);
    if (k + 1 < chunks) published = publish(k + 1);
    consume(k);
  }
}

// Fills DirectProgram::synced of each rank's program from all of them, and
// checks that every wait names a signal that exists (throws internal if not).
void analyse(std::span<DirectProgram> programs);

}  // namespace comm::direct
