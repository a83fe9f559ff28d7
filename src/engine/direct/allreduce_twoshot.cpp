// Two-shot all-reduce through peer memory: every rank publishes the blocks of
// its input the others reduce (block p for rank p; its own it reads from its
// input); rank r folds block r of every input (in rank order) into its output
// and into its own window; everyone then copies the other reduced blocks out
// of their owners' windows. Each byte is copied about as often as by a ring
// over cross-memory reads, but with two flag latencies instead of 2(n-1). Chunked through three window sections
// and pipelined: a rank publishes chunk k+1 before it reduces chunk k, so all
// ranks reduce in parallel while the next chunk is being published. Each
// block is reduced by one rank only, so every rank holds identical bits.

#include "engine/direct/direct_builders.hpp"

namespace comm::direct {

bool eligible_allreduce_twoshot(const DirectArgs& a) { return chunks_fit(a, 1, 2); }

void build_allreduce_twoshot(const DirectArgs& a, ProgramBuilder& b) {
  using B = ProgramBuilder;
  const Chunks c(a.count, 1, a.elem_size, a.window_bytes);
  const auto n = static_cast<std::size_t>(a.nranks);
  const auto r = static_cast<std::size_t>(a.rank);
  const std::size_t e = a.elem_size;
  // Block p of chunk k: its bytes from the chunk's start, and its length.
  auto off = [&](std::size_t k, std::size_t p) { return block_offset(c.len(k), n, p) * e; };
  auto len = [&](std::size_t k, std::size_t p) { return block_size(c.len(k), n, p) * e; };
  auto publish = [&](std::size_t k) {
    for (std::size_t p = 0; p < n; ++p)
      if (p != r) b.copy(B::window(a.rank, c.at(k, 0) + off(k, p)), B::input(c.begin(k) * e + off(k, p)), len(k, p));
    return b.signal();
  };
  std::vector<DirectRef> srcs(n);
  pipeline(b, c.size(), publish, [&](std::size_t k) {
    for (std::size_t p = 0; p < n; ++p)
      srcs[p] = p == r ? B::input(c.begin(k) * e + off(k, r)) : B::window(static_cast<int>(p), c.at(k, 0) + off(k, r));
    const DirectRef mine = B::window(a.rank, c.at(k, 0) + off(k, r));
    b.reduce(B::output(c.begin(k) * e + off(k, r)), srcs, len(k, r), &mine);
    b.wait_all(b.signal());
    for (std::size_t p = 0; p < n; ++p)
      if (p != r)
        b.copy(B::output(c.begin(k) * e + off(k, p)), B::window(static_cast<int>(p), c.at(k, 0) + off(k, p)),
               len(k, p));
  });
}

}  // namespace comm::direct
