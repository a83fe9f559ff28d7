// One-shot all-reduce through peer memory: every rank publishes its whole
// input in its window and signals; once every flag is up, every rank reduces
// all n windows, in rank order, into its output. One flag latency deep (the
// smallest messages travel in the flag's own cache line); each rank reads n
// copies, so it is for messages that fit one window. Every rank folds the
// same operands in the same order, so all hold identical bits.

#include "engine/direct/direct_builders.hpp"

namespace comm::direct {

bool eligible_allreduce_oneshot(const DirectArgs& a) {
  const ChunkLayout l = chunk_layout(a.count, 1, a.elem_size, a.window_bytes, a.window_bytes);
  return l.chunks == 1 && l.data_offset + l.section_bytes <= a.window_bytes;
}

void build_allreduce_oneshot(const DirectArgs& a, ProgramBuilder& b) {
  const ChunkLayout l = chunk_layout(a.count, 1, a.elem_size, a.window_bytes, a.window_bytes);
  const std::size_t bytes = a.count * a.elem_size;
  b.copy(ProgramBuilder::window(a.rank, l.data_offset), ProgramBuilder::input(0), bytes);
  b.wait_all(b.signal());
  std::vector<DirectRef> srcs;
  for (int p = 0; p < a.nranks; ++p) srcs.push_back(ProgramBuilder::window(p, l.data_offset));
  b.reduce(ProgramBuilder::output(0), srcs, bytes);
}

}  // namespace comm::direct
