#include "engine/direct/direct_engine.hpp"

#include "engine/reduce_kernels.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <cstring>
#include <span>

namespace comm::direct {

DirectEngine::DirectEngine(Transport& transport, DirectMemory& memory, int rank, int size)
    : transport_(transport),
      memory_(memory), peer_reads_(memory.peer_reads()), info_(memory.info()), costs_(direct_costs(info_)), rank_(rank), size_(size) {
  for (int p = 0; p < size_; ++p)
    if (p != rank_) guard_.push_back({p, 0});
  wait_buffer_.resize(static_cast<std::size_t>(std::max(1, size_ - 1)));
  host_.rank = rank_;
  host_.peer_reads = peer_reads_;
  host_.wait_buffer = wait_buffer_.data();
  host_.wait_capacity = wait_buffer_.size();
  host_.spin = std::chrono::nanoseconds(info_.spin_ns);
  windows_.resize(info_.slots);
  ring_next_.assign(info_.slots, 0);
  for (unsigned s = 0; s < info_.slots; ++s)
    for (int p = 0; p < size_; ++p) windows_[s].push_back(memory_.window(p, s));
  touch_windows();
}

// The flag's line stays as it is (flags only grow), and so does the line region.
void DirectEngine::touch_windows() {
  if (!host_data_region()) return;
  for (unsigned s = 0; s < info_.slots; ++s)
    std::memset(windows_[s][static_cast<std::size_t>(rank_)] + kDirectLineBytes, 0,
                window_data_bytes() - kDirectLineBytes);
}

void DirectEngine::read_peer_windows() const {
  if (!host_data_region()) return;
  const std::size_t end = window_data_bytes();
  std::uint64_t sum = 0;
  for (unsigned s = 0; s < info_.slots; ++s)
    for (int p = 0; p < size_; ++p)
      if (p != rank_)
        for (std::size_t at = kDirectLineBytes; at < end; at += kDirectLineBytes)
          sum += std::to_integer<std::uint64_t>(windows_[s][static_cast<std::size_t>(p)][at]);
  volatile std::uint64_t keep = sum;  // the loads must happen
  (void)keep;
}

const DirectAlgorithm* DirectEngine::find(Collective c, std::string_view name) const {
  // The communicator hands the same name (its selector's string) while calls repeat.
  const Checked& last = checked_[static_cast<std::size_t>(c)];
  if (last.algorithm && last.name.data() == name.data() && last.name.size() == name.size()) return last.algorithm;
  return find_direct_algorithm(c, name);
}

DirectArgs DirectEngine::args(const DirectAlgorithm& a, std::size_t count, std::size_t elem_size, int root) const {
  DirectArgs d;
  d.collective = a.collective;
  d.rank = rank_;
  d.nranks = size_;
  d.count = count;
  d.elem_size = elem_size;
  d.root = root;
  d.window_bytes = window_data_bytes();
  d.peer_reads = peer_reads_ != nullptr;
  return d;
}

bool DirectEngine::eligible(const DirectAlgorithm& a, std::size_t count, std::size_t elem_size, int root) const {
  return !a.eligible || a.eligible(args(a, count, elem_size, root));
}

double DirectEngine::predict(const DirectAlgorithm& a, std::size_t count, std::size_t elem_size,
                             const ComputeParams& compute) const {
  return predict_direct_us(a, args(a, count, elem_size, 0), costs_, compute);
}

std::vector<std::string> DirectEngine::algorithms(Collective c) const {
  std::vector<std::string> names;
  if (info_.memory != MemoryKind::host) return names;  // this executor runs host windows only
  for (const DirectAlgorithm& a : all_direct_algorithms())
    if (a.collective == c) names.emplace_back(a.name);
  return names;
}

std::string DirectEngine::unavailable(Collective c, std::string_view name) const {
  const DirectAlgorithm* a = find_direct_algorithm(c, name);
  return a ? unavailable(*a) : std::string();
}

std::string DirectEngine::unavailable(const DirectAlgorithm& a) const {
  if (!a.reads_peers || peer_reads_) return {};
  return "reads the other ranks' buffers, but transport '" + std::string(transport_.name()) +
         "' cannot read every rank's memory here: " + info_.no_peer_reads + " (pick another algorithm)";
}

double DirectEngine::predict_us(Collective c, std::string_view name, std::size_t bytes,
                                const ComputeParams& compute) const {
  const DirectAlgorithm* a = find_direct_algorithm(c, name);
  if (!a) return -1.0;
  // Sized like the selector's schedules: f32 elements, per-rank blocks for the
  // collectives whose message is n blocks.
  constexpr std::size_t kElem = 4;
  std::size_t count = std::max<std::size_t>(1, bytes / kElem);
  if (c == Collective::reduce_scatter || c == Collective::allgather || c == Collective::all_to_all)
    count = std::max<std::size_t>(1, count / static_cast<std::size_t>(size_));
  if (c == Collective::barrier) count = 0;
  return predict(*a, count, kElem, compute);
}

namespace {

// The lowest window byte any of `programs` writes and the end of the highest
// (every window operand lies inside some rank's writes).
std::pair<std::size_t, std::size_t> window_data_extent(std::span<const DirectProgram> programs) {
  std::size_t lo = static_cast<std::size_t>(-1), hi = 0;
  for (const DirectProgram& p : programs)
    for (const DirectOp& op : p.ops)
      if (op.kind == DirectOpKind::copy || op.kind == DirectOpKind::reduce)
        for (const DirectRef* r : {&op.dst, op.has_dst2 ? &op.dst2 : nullptr})
          if (r && r->space == DirectSpace::window) {
            lo = std::min(lo, r->offset);
            hi = std::max(hi, r->offset + op.bytes);
          }
  return {lo, hi};
}

}  // namespace

// A rank that rewrites window lines a peer read in an earlier call must first
// take them back from that peer's cache: on the development VM (two vCPUs of
// an EPYC, 1 MiB L2 each) one process copies 32-128 KiB into lines the other
// core read last time at 7-9 GB/s, and into lines last touched 2 MiB of data
// ago (gone from that core's L2) at 31-33 GB/s, while the other reads either
// at 35-40 GB/s. So the data region of each slot is a ring: every call puts
// its window data right after the previous call's in that slot, whatever the
// algorithm, and so writes the lines written longest ago. comm-bench --algo
// mem_twoshot, 2 ranks, medians of 8 alternated runs, fixed against moving:
// 16 KiB 3.41 -> 1.49 us, 64 KiB 12.95 -> 5.19 us, 256 KiB 42.4 -> 18.2 us,
// 1 MiB 93 -> 75 us. Data below kRingFromBytes stays put: its lines are few
// and fresh pages cost more than taking them back (mem_twoshot 2 KiB: 0.55 ->
// 0.76 us, 4 KiB: 0.57 -> 1.10 us).
void DirectEngine::size_in_ring(DirectPlan& plan, std::span<const DirectProgram> all, std::size_t window_bytes) {
  constexpr std::size_t kRingFromBytes = 8192;
  const auto [lo, hi] = window_data_extent(all);
  // Data sharing the flag's cache line stays there.
  if (hi <= lo || lo < kDirectSignatureOffset || hi - lo < kRingFromBytes || window_bytes < hi) return;
  constexpr std::size_t kPage = 4096;
  plan.ring_bytes = (hi - lo + kPage - 1) / kPage * kPage;
  plan.data_end = hi;
}

std::size_t DirectEngine::place_data(const DirectPlan& plan, unsigned slot) {
  if (plan.ring_bytes == 0) return 0;
  std::size_t& next = ring_next_[slot];
  if (next + plan.data_end > window_data_bytes()) next = 0;
  const std::size_t shift = next;
  next += plan.ring_bytes;
  return shift;
}

const DirectPlan& DirectEngine::plan(const DirectAlgorithm& a, std::size_t count, std::size_t elem_size,
                                     int root) {
  const Key key{&a, count, elem_size, root};
  for (const auto& [k, p] : recent_)
    if (p && k == key) return *p;
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    // Every rank's program, so that `synced` (and any deadlock) is known before anything runs.
    std::vector<DirectProgram> all;
    all.reserve(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      DirectArgs d = args(a, count, elem_size, root);
      d.rank = r;
      ProgramBuilder b(r, size_);
      a.build(d, b);
      all.push_back(std::move(b).finish());
    }
    analyse(all);
    auto p = std::make_unique<DirectPlan>();
    size_in_ring(*p, all, window_data_bytes());  // from every rank's program
    p->program = std::move(all[static_cast<std::size_t>(rank_)]);
    p->one_shot = one_shot_shape(p->program, rank_, size_, elem_size);
    if (p->one_shot && line_region_ && one_shot_in_lines(p->one_shot->offset, p->one_shot->bytes)) {
      p->one_shot->lines = line_region_;
      p->ring_bytes = 0;  // the data travels in the line region instead
    }
    p->algorithm_index = static_cast<std::size_t>(&a - all_direct_algorithms().data());
    if (p->program.scratch_bytes > scratch_.size()) {
      scratch_.resize(p->program.scratch_bytes);
      host_.scratch = scratch_.data();
    }
    it = plans_.emplace(key, std::move(p)).first;
  }
  recent_[recent_next_++ % recent_.size()] = {key, it->second.get()};
  return *it->second;
}

void DirectEngine::check(const detail::Call& call, std::string_view algorithm) const {
  const DirectAlgorithm* a = find(call.collective, algorithm);
  if (!a)
    throw Error(ErrorCode::internal, "direct engine: no direct-memory algorithm '" + std::string(algorithm) + "'");
  if (call.memory != info_.memory)
    throw Error(ErrorCode::unsupported, std::string(to_string(call.collective)) + " (" + std::string(algorithm) +
                                            "): the windows hold " + std::string(to_string(info_.memory)) +
                                            " memory, the buffers are " + std::string(to_string(call.memory)));
  const std::size_t esize = dtype_size(call.dtype);
  Checked& last = checked_[static_cast<std::size_t>(call.collective)];
  if (last.algorithm == a && last.count == call.count && last.elem_size == esize && last.root == call.root) {
    last.name = algorithm;
    return;
  }
  if (!eligible(*a, call.count, esize, call.root)) {
    if (std::string why = unavailable(*a); !why.empty())
      throw Error(ErrorCode::unsupported,
                  std::string(to_string(a->collective)) + ": algorithm '" + std::string(a->name) + "' " + why);
    throw Error(ErrorCode::unsupported, std::string(to_string(a->collective)) + ": algorithm '" +
                                            std::string(a->name) + "' does not fit " +
                                            std::to_string(call.count * esize) + " B per rank in windows of " +
                                            std::to_string(args(*a, call.count, esize, call.root).window_bytes) +
                                            " B (raise shm.size / COMM_SHM_SIZE, or pick another algorithm)");
  }
  last = Checked{a, algorithm, call.count, esize, call.root, nullptr};
}

void DirectEngine::start(detail::Operation& op, const detail::Call& call) {
  const DirectAlgorithm* a = find(call.collective, op.algorithm);
  run(*a, DirectRun{.signature = op.signature,
                    .input = call.input,
                    .output = call.output,
                    .count = call.count,
                    .in_bytes = call.in_bytes,
                    .out_bytes = call.out_bytes,
                    .dtype = call.dtype,
                    .op = call.op,
                    .root = call.root,
                    .deadline = op.deadline});
  op.state = detail::Operation::State::done;
}

PreparedCall DirectEngine::prepare(const DirectAlgorithm& a, const DirectRun& call) {
  const std::size_t esize = dtype_size(call.dtype);
  Checked& last = checked_[static_cast<std::size_t>(a.collective)];
  const bool repeat = last.algorithm == &a && last.count == call.count && last.elem_size == esize && last.root == call.root;
  const DirectPlan& p = repeat && last.plan ? *last.plan : plan(a, call.count, esize, call.root);
  if (repeat) last.plan = &p;
  const bool avg = call.op == ReduceOp::avg &&
                   (a.collective == Collective::allreduce || a.collective == Collective::reduce_scatter ||
                    (a.collective == Collective::reduce && call.root == rank_));
  return PreparedCall{.plan = &p,
                      .call_word = call_word(call.signature, p.algorithm_index, call.count),
                      .avg_count = avg ? call.out_bytes / esize : 0};
}

void DirectEngine::run(const DirectAlgorithm& a, const DirectRun& call) { run(prepare(a, call), call); }

void DirectEngine::run(const PreparedCall& prepared, const DirectRun& call) {
  const DirectPlan& p = *prepared.plan;
  HostCall& h = host_;
  h.call_word = prepared.call_word;
  h.input = static_cast<const std::byte*>(call.input);
  h.output = static_cast<std::byte*>(call.output);
  h.dtype = call.dtype;
  h.op = call.op;
  h.deadline = call.deadline;
  h.timeout = call.timeout;
  h.note = call.note;
  h.note_arg = call.note_arg;
  h.noted = false;
  // A partially overlapping input would be overwritten while still being read.
  const auto* in = h.input;
  const auto* out = h.output;
  if (in && out && in != out && in < out + call.out_bytes && out < in + call.in_bytes) {
    input_copy_.assign(in, in + call.in_bytes);
    h.input = input_copy_.data();
  }
  h.seq = ++seq_;
  const unsigned previous_slot = slot_;
  slot_ = slot_ + 1 == info_.slots ? 0 : slot_ + 1;  // seq_ % slots, without a division per call
  h.slot = slot_;
  h.windows = windows_[h.slot].data();
  h.data_shift = place_data(p, h.slot);
  if (!last_synced_ && h.seq > 1) {
    // The previous program did not make this rank wait for every peer: before
    // writing the slot of two calls ago, know that every peer has moved on
    // from it (issued a signal in the previous call).
    for (auto& g : guard_) g.value = direct_flag(h.seq - 1, 1);
    run_note(h);
    memory_.wait(previous_slot, guard_, deadline_of(h), nullptr);
  }
  last_synced_ = p.program.synced;
  if (p.one_shot)
    run_one_shot_on_host(*p.one_shot, memory_, h);
  else
    run_on_host(p.program, memory_, h);
  if (prepared.avg_count) kernels::finish_avg(call.output, prepared.avg_count, call.dtype, size_);
}

}  // namespace comm::direct
