// Building and checking direct-memory programs (direct_algorithm.hpp).

#include "engine/direct/direct_algorithm.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <string>

namespace comm::direct {
namespace {

constexpr std::size_t kLine = 64;

bool is_peer(const DirectRef& r) { return is_peer_buffer(r.space); }

}  // namespace

ChunkLayout chunk_layout(std::size_t count, std::size_t pieces, std::size_t elem_size, std::size_t window_bytes,
                         std::size_t max_section) {
  ChunkLayout l;
  const std::size_t total = count * pieces * elem_size;
  if (kDirectFlagBytes + total <= kDirectSignatureOffset) {  // flag, data and signature in one cache line
    l.data_offset = kDirectFlagBytes;
    l.per_chunk = count;
    l.chunks = 1;
    l.section_bytes = total;
    return l;
  }
  l.data_offset = kLine;
  if (kLine + total <= window_bytes && total <= max_section) {
    l.per_chunk = count;
    l.chunks = 1;
    l.section_bytes = total;
    return l;
  }
  l.section_bytes = window_bytes > kLine ? (window_bytes - kLine) / kSections / kLine * kLine : 0;
  l.section_bytes = std::min(l.section_bytes, max_section / kLine * kLine);
  std::size_t per = l.section_bytes / (pieces * elem_size);
  const std::size_t line_elems = kLine / elem_size;
  if (per >= line_elems) per = per / line_elems * line_elems;  // pieces start on cache lines
  l.per_chunk = per;
  l.chunks = per ? (count + per - 1) / per : 0;
  return l;
}

bool chunks_fit(const DirectArgs& a, std::size_t pieces, unsigned steps_per_chunk) {
  const ChunkLayout l = chunk_layout(a.count, pieces, a.elem_size, a.window_bytes);
  if (l.chunks == 0) return false;
  if (l.data_offset + std::min<std::size_t>(l.chunks, kSections) * l.section_bytes > a.window_bytes) return false;
  return l.chunks * steps_per_chunk + 2 < (std::size_t{1} << kDirectStepBits);
}

std::uint32_t publish_blocks(ProgramBuilder& b, const DirectArgs& a, const Chunks& c, std::size_t k) {
  const std::size_t e = a.elem_size;
  for (int p = 0; p < a.nranks; ++p)
    if (p != a.rank)
      b.copy(ProgramBuilder::window(a.rank, c.at(k, static_cast<std::size_t>(p))),
             ProgramBuilder::input((static_cast<std::size_t>(p) * a.count + c.begin(k)) * e), c.len(k) * e);
  return b.signal();
}

void ProgramBuilder::note_write(const DirectRef& r, std::size_t bytes) {
  check_ref(r, false);
  if (r.space == DirectSpace::window) {
    p_.window_bytes = std::max(p_.window_bytes, r.offset + bytes);
    lowest_window_write_ = std::min(lowest_window_write_, r.offset);
  }
  if (r.space == DirectSpace::scratch) p_.scratch_bytes = std::max(p_.scratch_bytes, r.offset + bytes);
}

// A program writes only its own memory, and reads a peer's buffer only as a
// copy's source (its own buffers are `input`/`output`).
void ProgramBuilder::check_ref(const DirectRef& r, bool as_copy_source) const {
  const bool bad_write = !as_copy_source && (r.space == DirectSpace::window ? r.rank != rank_ : is_peer(r));
  if (bad_write)
    throw Error(ErrorCode::internal, "direct-memory program of rank " + std::to_string(rank_) + " writes rank " +
                                         std::to_string(r.rank) + "'s memory");
  if (as_copy_source && is_peer(r) && (r.rank == rank_ || r.rank < 0 || r.rank >= nranks_))
    throw Error(ErrorCode::internal, "direct-memory program of rank " + std::to_string(rank_) +
                                         " copies from the buffer of rank " + std::to_string(r.rank) +
                                         ", which is not one of its peers");
}

void ProgramBuilder::copy(DirectRef dst, DirectRef src, std::size_t bytes) {
  if (bytes == 0) return;
  DirectOp op;
  op.kind = DirectOpKind::copy;
  op.bytes = bytes;
  op.dst = dst;
  op.first_src = static_cast<std::uint32_t>(p_.srcs.size());
  op.num_srcs = 1;
  check_ref(src, true);
  if (is_peer(src)) p_.reads_peers = true;
  p_.srcs.push_back(src);
  note_write(dst, bytes);
  p_.ops.push_back(op);
}

void ProgramBuilder::reduce(DirectRef dst, std::span<const DirectRef> srcs, std::size_t bytes, const DirectRef* dst2) {
  if (bytes == 0) return;
  if (srcs.size() == 1) {  // a one-rank "reduction" is a copy
    copy(dst, srcs[0], bytes);
    if (dst2) copy(*dst2, srcs[0], bytes);
    return;
  }
  DirectOp op;
  op.kind = DirectOpKind::reduce;
  op.bytes = bytes;
  op.dst = dst;
  op.first_src = static_cast<std::uint32_t>(p_.srcs.size());
  op.num_srcs = static_cast<std::uint32_t>(srcs.size());
  for (const DirectRef& src : srcs)
    if (is_peer(src))
      throw Error(ErrorCode::internal, "direct-memory program of rank " + std::to_string(rank_) +
                                           " reduces straight from a peer's buffer (only copies read those)");
  p_.srcs.insert(p_.srcs.end(), srcs.begin(), srcs.end());
  if (dst2) {
    op.has_dst2 = true;
    op.dst2 = *dst2;
    note_write(*dst2, bytes);
  }
  note_write(dst, bytes);
  p_.ops.push_back(op);
}

std::uint32_t ProgramBuilder::signal() {
  DirectOp op;
  op.kind = DirectOpKind::signal;
  op.step = ++p_.steps;
  p_.ops.push_back(op);
  return op.step;
}

void ProgramBuilder::wait(int rank, std::uint32_t step) {
  if (rank == rank_) return;
  DirectOp op;
  op.kind = DirectOpKind::wait;
  op.rank = rank;
  op.step = step;
  p_.ops.push_back(op);
}

void ProgramBuilder::wait_all(std::uint32_t step) {
  for (int p = 0; p < nranks_; ++p) wait(p, step);
}

DirectProgram ProgramBuilder::finish() && {
  if (p_.steps == 0) signal();  // every rank signals in every call (see comm/direct.hpp "Slots")
  if (p_.reads_peers && lowest_window_write_ < kDirectPeerDataOffset)
    throw Error(ErrorCode::internal, "direct-memory program of rank " + std::to_string(rank_) +
                                         " reads peers' buffers but writes window bytes from " +
                                         std::to_string(lowest_window_write_) + ", below kDirectPeerDataOffset (" +
                                         std::to_string(kDirectPeerDataOffset) + ", where the addresses live)");
  return std::move(p_);
}

// Vector clocks over all ranks' programs: known[r][q] is the highest step of
// rank q that rank r has (transitively) waited for.
void analyse(std::span<DirectProgram> programs) {
  const auto n = programs.size();
  std::vector<std::size_t> pc(n, 0);
  std::vector<std::vector<std::uint32_t>> known(n, std::vector<std::uint32_t>(n, 0));
  std::vector<std::vector<std::vector<std::uint32_t>>> at_signal(n);  // [rank][step-1] -> clock
  std::size_t done = 0;
  for (bool moved = true; moved;) {
    moved = false;
    for (std::size_t r = 0; r < n; ++r) {
      const DirectProgram& p = programs[r];
      while (pc[r] < p.ops.size()) {
        const DirectOp& op = p.ops[pc[r]];
        if (op.kind == DirectOpKind::signal) {
          known[r][r] = op.step;
          at_signal[r].push_back(known[r]);
        } else if (op.kind == DirectOpKind::wait) {
          const auto q = static_cast<std::size_t>(op.rank);
          if (q >= n || at_signal[q].size() < op.step) break;
          const auto& theirs = at_signal[q][op.step - 1];
          for (std::size_t i = 0; i < n; ++i) known[r][i] = std::max(known[r][i], theirs[i]);
        }
        ++pc[r];
        moved = true;
      }
    }
  }
  for (std::size_t r = 0; r < n; ++r) done += pc[r] == programs[r].ops.size();
  if (done != n) {
    std::string stuck;
    for (std::size_t r = 0; r < n; ++r)
      if (pc[r] < programs[r].ops.size()) {
        const DirectOp& op = programs[r].ops[pc[r]];
        stuck += " rank " + std::to_string(r) + " waits for step " + std::to_string(op.step) + " of rank " +
                 std::to_string(op.rank) + ";";
      }
    throw Error(ErrorCode::internal, "direct-memory programs deadlock:" + stuck);
  }
  for (std::size_t r = 0; r < n; ++r) {
    bool all = true;
    for (std::size_t q = 0; q < n; ++q) all = all && (q == r || known[r][q] >= 1);
    programs[r].synced = all;
  }
}

}  // namespace comm::direct
