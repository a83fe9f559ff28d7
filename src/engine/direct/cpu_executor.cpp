#include "engine/direct/cpu_executor.hpp"

#include "engine/direct/direct_algorithm.hpp"
#include "engine/reduce_kernels.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>

namespace comm::direct {
namespace {

// Reductions of more than two sources go tile by tile through a buffer in L1:
// every source is read once, the destination written once, and a destination
// that is also a source is read before it is overwritten.
constexpr std::size_t kTile = 4096;

std::uint64_t load_word(const std::byte* p) {
  return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(const_cast<std::byte*>(p)))
      .load(std::memory_order_relaxed);
}

std::uint64_t load_flag(const std::byte* p) {
  return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(const_cast<std::byte*>(p)))
      .load(std::memory_order_acquire);
}

void store_word(std::byte* p, std::uint64_t v) {
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(p)).store(v, std::memory_order_relaxed);
}

[[noreturn, gnu::noinline, gnu::cold]] void throw_mismatch(int peer, std::uint64_t theirs, const HostCall& call) {
  throw Error(ErrorCode::mismatch, "rank " + std::to_string(peer) + " is in " + describe_call_word(theirs) +
                                       " while rank " + std::to_string(call.rank) + " is in " +
                                       describe_call_word(call.call_word) +
                                       "; every rank must make the same calls in the same order");
}

// Throws mismatch if `peer` is in another call than `call` (its signal of
// this call arrived, so its words are this call's).
inline void check_call(std::byte* const* win, int peer, const HostCall& call) {
  const std::uint64_t theirs = load_word(win[peer] + kDirectSignatureOffset);
  if (theirs != call.call_word) throw_mismatch(peer, theirs, call);
}

// check_call for every peer of `waits`; `entered_only`: a wait that ended
// early, so only a peer whose call number shows it entered this call counts.
inline void check_calls(std::byte* const* win, const FlagWait* waits, std::size_t k, const HostCall& call,
                        bool entered_only) {
  for (std::size_t w = 0; w < k; ++w) {
    const int peer = waits[w].rank;
    if (entered_only && load_flag(win[peer] + kDirectCallOffset) != call.seq) continue;
    check_call(win, peer, call);
  }
}

// Which call this is, published with the first signal in the flag's line, and
// first of all in the line region's call line by a one-shot in line flags
// (see comm/direct.hpp). The call number goes last, with release: a reader
// that sees it also sees the signature.
void publish_call(const HostCall& call, std::byte* line) {
  store_word(line + kDirectSignatureOffset, call.call_word);
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(line + kDirectCallOffset))
      .store(call.seq, std::memory_order_release);
}
void publish_call(const HostCall& call) { publish_call(call, call.windows[call.rank]); }

// Waits for the k flags of `waits` (batched consecutive waits of one program),
// looking before calling into the memory's wait: usually the peers are there
// already. The first batch of a call also checks that the peers are in this call.
void wait_batch(DirectMemory& memory, const HostCall& call, const FlagWait* waits, std::size_t k, bool& checked) {
  std::byte* const* win = call.windows;
  bool ready = true;
  for (std::size_t w = 0; w < k && ready; ++w) ready = load_flag(win[waits[w].rank]) >= waits[w].value;
  if (!ready) {
    run_note(call);
    try {
      memory.wait(call.slot, std::span<const FlagWait>(waits, k), deadline_of(call), nullptr);
    } catch (const Error& e) {
      // A peer that left (or died) after entering a different call: say that instead.
      if (e.code() == ErrorCode::peer_failed) check_calls(win, waits, k, call, true);
      if (e.code() != ErrorCode::timeout && e.code() != ErrorCode::peer_failed) throw;
      std::vector<int> missing;
      for (std::size_t w = 0; w < k; ++w)
        if (load_flag(win[waits[w].rank]) < waits[w].value) missing.push_back(waits[w].rank);
      std::sort(missing.begin(), missing.end());
      throw WaitFailure(e, std::move(missing));
    }
  }
  if (!checked) {
    checked = true;
    check_calls(win, waits, k, call, false);
  }
}

// The one-shot's wait: for step 1 of every peer from rank `from` on, in rank
// order (the first wait of the call, so the peers' calls are checked too).
// A look at their flags comes first, as in wait_batch, and when they are all
// there the wait list is never built.
void wait_for_peers(DirectMemory& memory, const HostCall& call, int nranks, int from) {
  const std::uint64_t flag = direct_flag(call.seq, 1);
  std::byte* const* win = call.windows;
  bool there = true;
  for (int p = from; p < nranks && there; ++p) there = p == call.rank || load_flag(win[p]) >= flag;
  if (there) {
    for (int p = from; p < nranks; ++p)
      if (p != call.rank) check_call(win, p, call);
    return;
  }
  std::size_t k = 0;
  for (int p = from; p < nranks; ++p)
    if (p != call.rank) call.wait_buffer[k++] = {p, flag};
  bool checked = false;
  wait_batch(memory, call, call.wait_buffer, k, checked);
}

// memcpy, inlined for the few bytes that share the flag's line (decode's
// 8 B all-reduce): a library call there is most of the copy's time.
inline void copy_bytes(std::byte* dst, const std::byte* src, std::size_t n) {
  const auto copy = [&](std::size_t at, auto word) {
    std::memcpy(&word, src + at, sizeof word);
    std::memcpy(dst + at, &word, sizeof word);
  };
  if (n >= 8 && n <= 16) {  // two 8-byte words, overlapping when n < 16
    copy(0, std::uint64_t{});
    copy(n - 8, std::uint64_t{});
  } else if (n >= 4 && n < 8) {
    copy(0, std::uint32_t{});
    copy(n - 4, std::uint32_t{});
  } else {
    std::memcpy(dst, src, n);
  }
}

void reduce_tiled(std::byte* dst, std::byte* dst2, const std::byte* const* srcs, std::size_t nsrcs,
                  std::size_t bytes, DataType dtype, ReduceOp op) {
  const std::size_t esize = dtype_size(dtype);
  alignas(64) std::byte tile[kTile];
  for (std::size_t at = 0; at < bytes; at += kTile) {
    const std::size_t len = std::min(kTile, bytes - at);
    const std::size_t n = len / esize;
    kernels::reduce(tile, srcs[0] + at, srcs[1] + at, n, dtype, op);
    for (std::size_t s = 2; s < nsrcs; ++s) kernels::reduce(tile, tile, srcs[s] + at, n, dtype, op);
    std::memcpy(dst + at, tile, len);
    if (dst2) std::memcpy(dst2 + at, tile, len);
  }
}

// For a program that reads peers' buffers: where this rank's are, published
// before the first signal with the call words (see comm/direct.hpp).
void publish_buffers(const DirectProgram& program, const HostCall& call) {
  if (!program.reads_peers) return;
  if (!call.peer_reads)
    throw Error(ErrorCode::internal, "direct-memory program reads peers' buffers, but the memory offers no peer reads");
  std::byte* mine = call.windows[call.rank];
  store_word(mine + kDirectPeerInputOffset, reinterpret_cast<std::uintptr_t>(call.input));
  store_word(mine + kDirectPeerOutputOffset, reinterpret_cast<std::uintptr_t>(call.output));
}

// Copies out of a peer's buffer at the address that peer published (the
// program reads it only after that peer's first signal, its call words checked).
void copy_from_peer(std::byte* const* win, const HostCall& call, std::byte* dst, const DirectRef& src,
                    std::size_t bytes) {
  const std::size_t at = src.space == DirectSpace::peer_input ? kDirectPeerInputOffset : kDirectPeerOutputOffset;
  const std::uint64_t base = load_word(win[src.rank] + at);
  try {
    call.peer_reads->read(src.rank, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(base + src.offset)),
                          dst, bytes);
  } catch (const Error& e) {
    // A peer that died while its buffer was read: the call failed waiting on
    // it, as on a flag of a peer that died, and the failure is that peer's.
    if (e.code() != ErrorCode::peer_failed) throw;
    throw WaitFailure(e, {src.rank});
  }
}

}  // namespace

std::string describe_call_word(std::uint64_t word) {
  const auto coll = static_cast<Collective>(word & 0xf);
  const auto dtype = static_cast<DataType>(word >> 4 & 0x7);
  const auto op = static_cast<ReduceOp>(word >> 7 & 0x7);
  const auto algorithms = all_direct_algorithms();
  const std::size_t index = word >> 14 & 0xff;
  std::string s = std::string(to_string(coll)) + " of " + std::to_string(word >> 22) + " elements of " +
                  std::string(to_string(dtype));
  if (coll == Collective::allreduce || coll == Collective::reduce || coll == Collective::reduce_scatter)
    s += " (" + std::string(to_string(op)) + ")";
  if (coll == Collective::broadcast || coll == Collective::reduce)
    s += " from root " + std::to_string(word >> 10 & 0xf) + " (mod 16)";
  return s + " by " + (index < algorithms.size() ? std::string(algorithms[index].name) : "an unknown algorithm");
}

void reduce_in_order(std::byte* dst, std::byte* dst2, const std::byte* const* srcs, std::size_t nsrcs,
                     std::size_t bytes, DataType dtype, ReduceOp op) {
  if (nsrcs != 2) return reduce_tiled(dst, dst2, srcs, nsrcs, bytes, dtype, op);  // its tile stays off this frame
  kernels::reduce(dst, srcs[0], srcs[1], bytes / dtype_size(dtype), dtype, op);
  if (dst2 && dst2 != dst) std::memcpy(dst2, dst, bytes);
}

void run_on_host(const DirectProgram& program, DirectMemory& memory, const HostCall& call) {
  const unsigned slot = call.slot;
  std::byte* const* win = call.windows;
  auto address = [&](const DirectRef& r) -> std::byte* {
    switch (r.space) {
      case DirectSpace::input: return const_cast<std::byte*>(call.input) + r.offset;
      case DirectSpace::output: return call.output + r.offset;
      case DirectSpace::window: return win[r.rank] + r.offset + call.data_shift;
      case DirectSpace::scratch: return call.scratch + r.offset;
      case DirectSpace::peer_input:
      case DirectSpace::peer_output: break;  // another process's address: copy_from_peer
    }
    return nullptr;
  };
  publish_call(call);
  publish_buffers(program, call);
  bool checked = false;
  FlagWait* waits = call.wait_buffer;
  std::array<const std::byte*, 64> few;
  std::vector<const std::byte*> many;  // sources beyond `few`
  const auto& ops = program.ops;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const DirectOp& op = ops[i];
    switch (op.kind) {
      case DirectOpKind::copy: {
        std::byte* dst = address(op.dst);
        const DirectRef& from = program.srcs[op.first_src];
        if (is_peer_buffer(from.space))
          copy_from_peer(win, call, dst, from, op.bytes);
        else if (const std::byte* src = address(from); dst != src)
          std::memcpy(dst, src, op.bytes);
        break;
      }
      case DirectOpKind::reduce: {
        const std::byte** srcs = few.data();
        if (op.num_srcs > few.size()) {
          many.resize(op.num_srcs);
          srcs = many.data();
        }
        for (std::uint32_t s = 0; s < op.num_srcs; ++s) srcs[s] = address(program.srcs[op.first_src + s]);
        reduce_in_order(address(op.dst), op.has_dst2 ? address(op.dst2) : nullptr, srcs, op.num_srcs, op.bytes,
                        call.dtype, call.op);
        break;
      }
      case DirectOpKind::signal:
        memory.signal(slot, direct_flag(call.seq, op.step), nullptr);
        break;
      case DirectOpKind::wait: {
        std::size_t k = 0;
        for (; i < ops.size() && ops[i].kind == DirectOpKind::wait && k < call.wait_capacity; ++i)
          waits[k++] = {ops[i].rank, direct_flag(call.seq, ops[i].step)};
        --i;
        wait_batch(memory, call, waits, k, checked);
        break;
      }
    }
  }
}

std::optional<OneShotShape> one_shot_shape(const DirectProgram& program, int rank, int nranks, std::size_t elem_size) {
  const auto n = static_cast<std::size_t>(nranks);
  const auto& ops = program.ops;
  constexpr std::size_t kMaxSources = 64;  // run_one_shot_on_host's sources live on its stack
  if (nranks < 2 || n > kMaxSources || ops.size() != n + 2 || program.steps != 1) return std::nullopt;
  const auto is = [](const DirectRef& r, DirectSpace space, int owner, std::size_t offset) {
    return r.space == space && (space != DirectSpace::window || r.rank == owner) && r.offset == offset;
  };
  const DirectOp& copy = ops[0];
  const DirectOp& reduce = ops[n + 1];
  if (copy.kind != DirectOpKind::copy || copy.dst.space != DirectSpace::window || copy.dst.rank != rank ||
      !is(program.srcs[copy.first_src], DirectSpace::input, -1, 0))
    return std::nullopt;
  const OneShotShape shape{nranks, copy.dst.offset, copy.bytes, elem_size ? copy.bytes / elem_size : 0};
  if (ops[1].kind != DirectOpKind::signal || ops[1].step != 1) return std::nullopt;
  std::vector<bool> awaited(n, false);
  for (std::size_t i = 2; i < n + 1; ++i) {
    const DirectOp& w = ops[i];
    if (w.kind != DirectOpKind::wait || w.step != 1 || w.rank < 0 || w.rank >= nranks || w.rank == rank ||
        awaited[static_cast<std::size_t>(w.rank)])
      return std::nullopt;
    awaited[static_cast<std::size_t>(w.rank)] = true;
  }
  if (reduce.kind != DirectOpKind::reduce || reduce.has_dst2 || reduce.num_srcs != n ||
      reduce.bytes != shape.bytes || !is(reduce.dst, DirectSpace::output, -1, 0))
    return std::nullopt;
  for (std::size_t p = 0; p < n; ++p)
    if (!is(program.srcs[reduce.first_src + p], DirectSpace::window, static_cast<int>(p), shape.offset))
      return std::nullopt;
  return shape;
}

namespace {

// ---- the one-shot in line flags (OneShotShape::lines)

// One line's payload, or the rest of a message whose last line is short: a
// full line is a copy of constant size, which the compiler inlines.
inline void copy_line_payload(std::byte* dst, const std::byte* src, std::size_t left) {
  if (left >= kDirectLinePayload) std::memcpy(dst, src, kDirectLinePayload);
  else std::memcpy(dst, src, left);
}

void publish_lines(std::byte* region, const std::byte* input, std::size_t bytes, std::uint64_t seq) {
  for (std::size_t at = 0; at < bytes; at += kDirectLinePayload, region += kDirectLineBytes) {
    copy_line_payload(region, input + at, bytes - at);
    std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(region + kDirectLinePayload))
        .store(seq, std::memory_order_release);
  }
}

// Polls `ready` for up to `spin` (at least once); false when it never held.
template <class Ready>
bool poll_for(Ready&& ready, std::chrono::nanoseconds spin) {
  if (ready()) return true;
  if (spin.count() == 0) return false;
  const auto end = std::chrono::steady_clock::now() + spin;
  for (unsigned i = 1;; ++i) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (ready()) return true;
    if ((i & 15) == 0 && std::chrono::steady_clock::now() >= end) return false;
  }
}

// Reads the peers' lines in rank order, each as it lands, until one does not
// come within HostCall::spin; from then on waits on the flags of the peers
// not yet read (wait_batch: sleeping, deaths, timeouts, the call check) and
// takes the rest, which the flag orders after the lines.
class LineReader {
 public:
  LineReader(const OneShotShape& shape, DirectMemory& memory, const HostCall& call)
      : shape_(shape), memory_(memory), call_(call) {}

  // Copies `peer`'s message into `dst`.
  void read(int peer, std::byte* dst) {
    const std::byte* call_line = call_.windows[peer] + shape_.lines;
    if (!waited_) {
      const auto entered = [&] { return load_flag(call_line + kDirectCallOffset) == call_.seq; };
      if (poll_for(entered, call_.spin)) {
        const std::uint64_t theirs = load_word(call_line + kDirectSignatureOffset);
        if (theirs != call_.call_word) throw_mismatch(peer, theirs, call_);
      } else {
        wait_for_rest(peer);
      }
    }
    const std::byte* line = call_line + kDirectLineBytes;
    for (std::size_t at = 0; at < shape_.bytes; at += kDirectLinePayload, line += kDirectLineBytes) {
      const auto landed = [&] { return load_flag(line + kDirectLinePayload) == call_.seq; };
      if (!waited_ && !poll_for(landed, call_.spin)) wait_for_rest(peer);
      if (waited_ && !landed())
        throw Error(ErrorCode::internal, "direct engine: rank " + std::to_string(peer) +
                                             " signalled a one-shot whose line flags are not all there");
      copy_line_payload(dst + at, line, shape_.bytes - at);
    }
  }

 private:
  // Waits for the signal of every peer from `from` on (rank order), as the program does.
  void wait_for_rest(int from) {
    waited_ = true;
    wait_for_peers(memory_, call_, shape_.nranks, from);
  }

  const OneShotShape& shape_;
  DirectMemory& memory_;
  const HostCall& call_;
  bool waited_ = false;
};

void run_one_shot_in_lines(const OneShotShape& shape, DirectMemory& memory, const HostCall& call) {
  std::byte* call_line = call.windows[call.rank] + shape.lines;
  publish_call(call, call_line);
  publish_lines(call_line + kDirectLineBytes, call.input, shape.bytes, call.seq);
  publish_call(call);
  memory.signal(call.slot, direct_flag(call.seq, 1), nullptr);
  // Folded in rank order, two sources at a time, as reduce_in_order does:
  // the same bits as the program's reduction on every rank.
  alignas(64) std::array<std::byte, kDirectLineMaxBytes> first, next, acc;
  LineReader reader(shape, memory, call);
  const auto source = [&](int p, std::byte* room) -> const std::byte* {
    if (p == call.rank) return call.input;
    reader.read(p, room);
    return room;
  };
  const int n = shape.nranks;
  const std::byte* left = source(0, first.data());
  for (int p = 1; p < n; ++p) {
    const std::byte* right = source(p, next.data());
    // The output is written last only: it may be the input (in place).
    std::byte* dst = p + 1 == n ? call.output : acc.data();
    kernels::reduce(dst, left, right, shape.elements, call.dtype, call.op);
    left = dst;
  }
}

}  // namespace

void run_one_shot_on_host(const OneShotShape& shape, DirectMemory& memory, const HostCall& call) {
  if (shape.lines) return run_one_shot_in_lines(shape, memory, call);
  std::byte* const* win = call.windows;
  publish_call(call);
  const std::size_t at = shape.offset + call.data_shift;
  std::byte* mine = win[call.rank] + at;
  if (mine != call.input) copy_bytes(mine, call.input, shape.bytes);
  memory.signal(call.slot, direct_flag(call.seq, 1), nullptr);
  wait_for_peers(memory, call, shape.nranks, 0);
  if (shape.nranks == 2)  // decode's tensor-parallel pair: one kernel call, no source list
    return kernels::reduce(call.output, win[0] + at, win[1] + at, shape.elements, call.dtype, call.op);
  std::array<const std::byte*, 64> srcs;
  for (int p = 0; p < shape.nranks; ++p) srcs[static_cast<std::size_t>(p)] = win[p] + at;
  reduce_in_order(call.output, nullptr, srcs.data(), static_cast<std::size_t>(shape.nranks), shape.bytes,
                  call.dtype, call.op);
}

}  // namespace comm::direct
