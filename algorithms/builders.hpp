#pragma once
// Private to algorithms/: the build function of every algorithm (listed by
// registry.cpp) and the phases several algorithms share. Ring all-reduce *is*
// ring reduce-scatter followed by ring all-gather, and two-shot all-reduce is
// direct reduce-scatter followed by direct all-gather, so those phases are
// written once, in the file of the collective they implement, and composed.

#include "algorithms/algorithm.hpp"
#include "algorithms/topology.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace comm::algo {

// ---- build functions (one file each) ------------------------------------
void build_allreduce_ring(const AlgoArgs& a, ScheduleBuilder& b);
void build_allreduce_tree(const AlgoArgs& a, ScheduleBuilder& b);
void build_allreduce_direct(const AlgoArgs& a, ScheduleBuilder& b);
void build_allreduce_twoshot(const AlgoArgs& a, ScheduleBuilder& b);
void build_allreduce_recursive_doubling(const AlgoArgs& a, ScheduleBuilder& b);
void build_allreduce_rabenseifner(const AlgoArgs& a, ScheduleBuilder& b);
void build_reduce_scatter_ring(const AlgoArgs& a, ScheduleBuilder& b);
void build_reduce_scatter_direct(const AlgoArgs& a, ScheduleBuilder& b);
void build_allgather_ring(const AlgoArgs& a, ScheduleBuilder& b);
void build_allgather_direct(const AlgoArgs& a, ScheduleBuilder& b);
void build_broadcast_tree(const AlgoArgs& a, ScheduleBuilder& b);
void build_broadcast_scatter_allgather(const AlgoArgs& a, ScheduleBuilder& b);
void build_reduce_tree(const AlgoArgs& a, ScheduleBuilder& b);
void build_reduce_direct(const AlgoArgs& a, ScheduleBuilder& b);
void build_all_to_all_pairwise(const AlgoArgs& a, ScheduleBuilder& b);
void build_all_to_all_bruck(const AlgoArgs& a, ScheduleBuilder& b);
void build_all_to_allv_pairwise(const AlgoArgs& a, ScheduleBuilder& b);
void build_barrier_dissemination(const AlgoArgs& a, ScheduleBuilder& b);
// Over the host groups (hierarchy.hpp): one file each, allreduce_hierarchical*.cpp etc.
void build_allreduce_hierarchical(const AlgoArgs& a, ScheduleBuilder& b);
void build_allreduce_hierarchical_rail(const AlgoArgs& a, ScheduleBuilder& b);
void build_reduce_scatter_hierarchical(const AlgoArgs& a, ScheduleBuilder& b);
void build_allgather_hierarchical(const AlgoArgs& a, ScheduleBuilder& b);
void build_broadcast_hierarchical(const AlgoArgs& a, ScheduleBuilder& b);
void build_reduce_hierarchical(const AlgoArgs& a, ScheduleBuilder& b);
// What the first four build from this rank's place among the hosts; the two-argument
// forms (hierarchy.cpp) find the place and skip empty calls for all of them.
struct HostPlace;
void build_allreduce_hierarchical(const AlgoArgs& a, const HostPlace& at, ScheduleBuilder& b);
void build_allreduce_hierarchical_rail(const AlgoArgs& a, const HostPlace& at, ScheduleBuilder& b);
void build_reduce_scatter_hierarchical(const AlgoArgs& a, const HostPlace& at, ScheduleBuilder& b);
void build_allgather_hierarchical(const AlgoArgs& a, const HostPlace& at, ScheduleBuilder& b);

// ---- shared phases --------------------------------------------------------

// Where each of the n blocks of a phase lives.
struct BlockLayout {
  std::vector<std::size_t> in_off;   // element offset of block j in the input
  std::vector<std::size_t> out_off;  // element offset of block j in the output
  std::vector<std::size_t> len;      // elements of block j
  // The buffers "input" and "output" stand for: a phase of a composed
  // algorithm (hierarchical all-reduce) may start from data an earlier phase
  // left in the output.
  BufferId src = BufferId::input;
  BufferId dst = BufferId::output;
  std::size_t max_len() const;
  Region in(std::size_t j, std::size_t at, std::size_t n) const { return {src, in_off[j] + at, n}; }
  Region out(std::size_t j, std::size_t at, std::size_t n) const { return {dst, out_off[j] + at, n}; }
  // Balanced blocks of one buffer (all-reduce, broadcast): input and output
  // offsets are equal.
  static BlockLayout balanced(std::size_t count, int n);
  // Equal blocks of `count`: input block j at j*count (or 0 if !input_strided),
  // output block j at j*count (or 0 if !output_strided).
  static BlockLayout uniform(std::size_t count, int n, bool input_strided, bool output_strided);
};

// A ring: this rank's position on it and the ranks before and after it.
struct RingView {
  int pos = 0;
  int n = 1;
  int next = 0;
  int prev = 0;
  static RingView of_rank(int rank, int n);
  // The ring through `order` (ranks, each once) in that order; `rank` must be in it.
  static RingView of_order(const std::vector<int>& order, int rank);
};

// Any group on the largest power of two p <= n (recursive doubling,
// Rabenseifner): with m = n - p, ranks 0..2m-1 pair up; the even rank of each
// pair only hands its input to the odd one and gets the result back (fold
// out), the odd one reduces it in first (absorbs); the remaining p ranks work
// as virtual ranks 0..p-1.
struct PowerOfTwoFold {
  int p = 1;
  int m = 0;
  int rounds = 0;          // log2 p
  bool folded_out = false;
  bool absorbs = false;
  int virtual_rank = 0;    // meaningful unless folded_out
  PowerOfTwoFold(int rank, int n);
  int real(int v) const { return v < m ? 2 * v + 1 : v + m; }
};

// The cases a reducing algorithm need not plan: no elements (an empty
// schedule) and one rank (a copy of input[0, count) to output). True when `a`
// is one of them and `b` holds its whole schedule.
bool build_trivial_reduction(const AlgoArgs& a, ScheduleBuilder& b);

// A folded-out rank's whole schedule: send the input to rank + 1 under
// fold_tag, receive the result into the output under unfold_tag (in place the
// receive overwrites the input the send read: it depends on the send).
void fold_out(ScheduleBuilder& b, int rank, std::size_t count, std::uint32_t fold_tag, std::uint32_t unfold_tag);

// The flat ring's order: ranks host by host (hosts ordered by lowest rank,
// ranks ascending within a host), so the ring crosses between hosts only
// num_hosts times; 0, 1, ..., n-1 when all ranks share a host or ranks are
// numbered host by host already.
std::vector<int> node_aware_order(const AlgoArgs& a);

// Ring reduce-scatter (reduce_scatter_ring.cpp). At step s (0..n-2) position
// p sends block (p + shift - s) and receives block (p + shift - s - 1), which
// it reduces as (partial from prev) (op) (own input); it ends owning block
// (p + shift + 1), written to that block's output range. Received partials go
// to distinct scratch slots (slot s at scratch_base + s * max_len), so
// receives never wait for buffer reuse. Uses (n-1) * chunks tags from tag_base.
struct RingReduceScatterResult {
  std::vector<StepId> owned_done;               // per chunk: the step writing the owned block
  std::vector<std::vector<StepId>> input_read;  // [block][chunk]: the step that reads that input
};
// A step that reads chunk c of this rank's own block j waits for
// (*input_ready)[j][c] if given (the phase that produced it, when composed).
RingReduceScatterResult ring_reduce_scatter(ScheduleBuilder& b, const RingView& ring, const BlockLayout& L,
                                            const Chunking& ch, int shift, std::size_t scratch_base,
                                            std::size_t tag_base,
                                            const std::vector<std::vector<StepId>>* input_ready = nullptr);
std::size_t ring_reduce_scatter_scratch(const BlockLayout& L, int n);

// Ring all-gather (allgather_ring.cpp). Position p starts holding block
// (p + shift) and at step s (0..n-2) sends block (p + shift - s) to next and
// receives block (p + shift - s - 1) from prev into its output range.
//  - own_from_input: the held block is sent from its input range, else output;
//  - own_ready[c]: the step after which chunk c of the held block is ready (or empty);
//  - write_guard[j][c]: a step that must finish before chunk c of output block
//    j may be overwritten (in-place all-reduce: the last read of that input);
//  - holder: a position that already holds every block in its input (the
//    broadcast root): it only sends, and nobody sends to it; -1 for none.
// Uses (n-1) * chunks tags from tag_base.
struct RingAllgatherSpec {
  int shift = 0;
  bool own_from_input = false;
  const std::vector<StepId>* own_ready = nullptr;
  const std::vector<std::vector<StepId>>* write_guard = nullptr;
  int holder = -1;
};
// Returns [block][chunk] the receive that wrote it (kNoStep where none did), for
// a composed algorithm's next phase to wait on.
std::vector<std::vector<StepId>> ring_allgather(ScheduleBuilder& b, const RingView& ring, const BlockLayout& L,
                                                const Chunking& ch, const RingAllgatherSpec& spec,
                                                std::size_t tag_base);

// Reduce along a tree (reduce_tree.cpp): per chunk this rank folds its input
// chunk with the partials of `kids`, in that order, and sends the result to
// `parent`; the root (parent < 0) writes it to root_dst instead. Non-roots
// never touch the output: partials go to scratch (kids.size() * count
// elements from scratch_base). One tag per chunk from tag_base.
struct TreeReduceResult {
  std::vector<StepId> done;        // per chunk: the root's write of root_dst, a non-root's send
  std::vector<StepId> input_read;  // per chunk: the last step that reads that input chunk
};
TreeReduceResult tree_reduce(ScheduleBuilder& b, int parent, const std::vector<int>& kids, std::size_t count,
                             const Chunking& ch, Region root_dst, std::size_t scratch_base, std::size_t tag_base);

// Broadcast along a tree (broadcast_tree.cpp): per chunk a non-root receives
// from `parent` into the output (after write_guard[c], if given) and forwards
// it to `kids` in the order given; the root (parent < 0) sends from root_src
// (after root_ready[c], if given) and writes nothing. One tag per chunk from
// tag_base.
struct TreeBroadcastSpec {
  Region root_src;  // count elements the root sends from
  const std::vector<StepId>* root_ready = nullptr;
  const std::vector<StepId>* write_guard = nullptr;
};
void tree_broadcast(ScheduleBuilder& b, int parent, const std::vector<int>& kids, std::size_t count,
                    const Chunking& ch, const TreeBroadcastSpec& spec, std::size_t tag_base);

// Direct reduce-scatter (reduce_scatter_direct.cpp): rank r sends input block
// j to rank j, receives its own block from every rank into scratch slot j
// (slot r is the accumulator) and folds the n operands in rank order
// 0, 1, ..., n-1 into its output block range. Requests its n * len[r]
// elements of scratch (at offset 0) itself.
struct DirectReduceScatterResult {
  StepId done = kNoStep;       // the step writing the output block
  std::vector<StepId> sent;    // [j]: the send of input block j (kNoStep for j == r)
};
DirectReduceScatterResult direct_reduce_scatter(ScheduleBuilder& b, int rank, int n, const BlockLayout& L,
                                                std::uint32_t tag);

// Direct all-gather (allgather_direct.cpp): rank r sends `own` (after
// own_ready) to every rank and receives block j from rank j into output
// block j (after write_guard[j] if given).
void direct_allgather(ScheduleBuilder& b, int rank, int n, const BlockLayout& L, Region own, StepId own_ready,
                      const std::vector<StepId>* write_guard, std::uint32_t tag);

// dst = x[0] (op) x[1] (op) ... (op) x[k-1], folded left in that order.
// Partial results go to `acc` (same length as dst), which may be x[1] (the
// first reduction consumes it) but no other operand. dst is written once, by
// the last step, after every operand was read, so it may be acc or alias an
// operand (in-place all-reduce). x_ready[i] is the step producing x[i] (or
// kNoStep); final_deps are extra steps the write of dst must wait for. One
// operand becomes a copy. Returns the step writing dst.
StepId fold_in_order(ScheduleBuilder& b, const std::vector<Region>& x, const std::vector<StepId>& x_ready,
                     Region acc, Region dst, const std::vector<StepId>& final_deps);

}  // namespace comm::algo
