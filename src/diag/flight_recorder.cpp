#include "diag/flight_recorder.hpp"

#include "util/coarse_clock.hpp"

#include <bit>
#include <cmath>

namespace comm::detail {
namespace {

const char* state_name(OpState s) {
  switch (s) {
    case OpState::posted: return "posted";
    case OpState::done: return "done";
    case OpState::failed: return "failed";
  }
  return "?";
}

}  // namespace

struct FlightRecorder::Entry {
  std::atomic<std::uint64_t> version{0};  // odd while the writer is in the entry
  std::atomic<std::uint64_t> id{0}, seq{0};
  std::atomic<Collective> collective{Collective::allreduce};
  std::atomic<const char*> algorithm{nullptr};
  std::atomic<std::size_t> algorithm_size{0};
  std::atomic<std::size_t> bytes{0};
  std::atomic<DataType> dtype{DataType::f32};
  std::atomic<ReduceOp> op{ReduceOp::sum};
  std::atomic<int> root{-1};
  std::atomic<OpState> state{OpState::posted};
  std::atomic<std::size_t> steps_done{0}, steps_total{0};
  std::atomic<double> start_us{0}, end_us{-1};
  std::atomic<bool> has_error{false};  // errors_ holds its message
};

namespace {

// The writer's stores and the reader's loads of the fields: relaxed, ordered
// by the version's fences.
template <class T, class V>
void put(std::atomic<T>& a, V v) noexcept {
  a.store(static_cast<T>(v), std::memory_order_relaxed);
}
template <class T>
T get(const std::atomic<T>& a) noexcept {
  return a.load(std::memory_order_relaxed);
}

}  // namespace

FlightRecorder::FlightRecorder(std::size_t capacity) { resize(capacity); }

FlightRecorder::~FlightRecorder() = default;

void FlightRecorder::resize(std::size_t capacity) {
  const std::size_t n = std::bit_ceil(std::max<std::size_t>(capacity, 1));
  ring_ = std::make_unique<Entry[]>(n);
  errors_.assign(n, std::string());
  mask_ = n - 1;
  recorded_.store(0, std::memory_order_release);
  finished_.store(0, std::memory_order_release);
}

void FlightRecorder::begin_write(Entry& e) noexcept {
  e.version.store(get(e.version) + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // odd before any field
}

void FlightRecorder::end_write(Entry& e) noexcept {
  e.version.store(get(e.version) + 1, std::memory_order_release);  // every field before even
}

bool FlightRecorder::read(const Entry& e, FlightRecord& r, std::uint64_t& version, bool& has_error) noexcept {
  const std::uint64_t before = e.version.load(std::memory_order_acquire);
  if (before & 1) return false;
  r.id = get(e.id);
  r.seq = get(e.seq);
  r.collective = get(e.collective);
  const char* name = get(e.algorithm);
  r.algorithm = name ? std::string_view(name, get(e.algorithm_size)) : std::string_view();
  r.bytes = get(e.bytes);
  r.dtype = get(e.dtype);
  r.op = get(e.op);
  r.root = get(e.root);
  r.state = get(e.state);
  r.steps_done = get(e.steps_done);
  r.steps_total = get(e.steps_total);
  r.start_us = get(e.start_us);
  r.end_us = get(e.end_us);
  has_error = get(e.has_error);
  r.error.clear();  // snapshot() copies the message when there is one
  std::atomic_thread_fence(std::memory_order_acquire);  // every field before the second look
  version = before;
  return e.version.load(std::memory_order_relaxed) == before;
}

// Millisecond resolution is plenty for explaining hangs, and the coarse clock
// keeps two clock reads per operation off the hot path (util/coarse_clock.hpp).
void FlightRecorder::post(std::uint64_t id, std::uint64_t seq, Collective collective, std::string_view algorithm,
                          std::size_t bytes, DataType dtype, ReduceOp op, int root, double start_us,
                          OpState state) {
  settle();
  Entry& e = ring_[id & mask_];
  begin_write(e);
  put(e.id, id);
  put(e.seq, seq);
  put(e.collective, collective);
  put(e.algorithm, algorithm.data());
  put(e.algorithm_size, algorithm.size());
  put(e.bytes, bytes);
  put(e.dtype, dtype);
  put(e.op, op);
  put(e.root, root);
  put(e.state, state);
  put(e.steps_done, state == OpState::done ? 1 : 0);
  put(e.steps_total, state == OpState::done ? 1 : 0);
  put(e.start_us, start_us);
  put(e.end_us, state == OpState::posted ? -1.0 : start_us);
  if (get(e.has_error)) {  // an earlier operation's message (rare: it failed)
    std::lock_guard lk(errors_mu_);
    errors_[id & mask_].clear();
    put(e.has_error, false);
  }
  end_write(e);
  recorded_.store(get(recorded_) + 1, std::memory_order_release);  // one writer: no read-modify-write
}

void FlightRecorder::update(std::uint64_t id, OpState state, std::size_t steps_done,
                            std::size_t steps_total, std::string_view error) {
  settle();
  write_update(id, state, steps_done, steps_total, state != OpState::posted ? now_us() : -1.0, error);
}

void FlightRecorder::write_update(std::uint64_t id, OpState state, std::size_t steps_done, std::size_t steps_total,
                                  double end_us, std::string_view error) {
  Entry& e = ring_[id & mask_];
  if (get(e.id) != id) return;  // overwritten by a newer operation
  begin_write(e);
  put(e.state, state);
  put(e.steps_done, steps_done);
  put(e.steps_total, steps_total);
  if (state != OpState::posted) put(e.end_us, end_us);
  if (!error.empty()) {
    std::lock_guard lk(errors_mu_);
    errors_[id & mask_] = error;
    put(e.has_error, true);
  }
  end_write(e);
}

void FlightRecorder::settle() {
  const std::uint64_t finished = get(finished_);
  if (finished == 0) return;
  write_update(finished - 1, OpState::done, 1, 1, get(finished_end_us_), {});
  finished_.store(0, std::memory_order_release);  // after the entry: a reader sees one or the other
}

std::vector<FlightRecord> FlightRecorder::snapshot() const {
  const std::uint64_t recorded = recorded_.load(std::memory_order_acquire);
  const std::uint64_t n = std::min<std::uint64_t>(recorded, mask_ + 1);
  // An operation finish()ed but not settled yet reads as done (the id and
  // the end of one finish(): the id did not change while the end was read).
  std::uint64_t finished = 0;
  double finished_end_us = -1;
  for (std::uint64_t again = finished_.load(std::memory_order_acquire); finished != again;) {
    finished = again;
    finished_end_us = finished_end_us_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    again = finished_.load(std::memory_order_relaxed);
  }
  std::vector<FlightRecord> out;
  out.reserve(n);
  for (std::uint64_t k = recorded - n; k < recorded; ++k) {
    const std::uint64_t at = k & mask_;
    FlightRecord r;
    // A write takes nanoseconds; an entry still being written after this
    // many looks belongs to a writer that stopped inside it: left out.
    bool got = false;
    for (int tries = 0; tries < 100000 && !got; ++tries) {
      std::uint64_t version = 0;
      bool has_error = false;
      if (!read(ring_[at], r, version, has_error)) continue;
      if (!has_error) {
        got = true;
        continue;
      }
      std::lock_guard lk(errors_mu_);  // the writer changes a message only inside a write
      r.error = errors_[at];
      got = ring_[at].version.load(std::memory_order_acquire) == version;
    }
    if (!got) continue;
    if (finished != 0 && r.id == finished - 1 && r.state == OpState::posted) {
      r.state = OpState::done;
      r.steps_done = r.steps_total = 1;
      r.end_us = finished_end_us;
    }
    out.push_back(std::move(r));
  }
  return out;
}

void FlightRecorder::write_operations(json::Writer& w) const {
  // Tenths of a microsecond are all a timeline needs; the rest is noise.
  const auto tenths = [](double us) { return std::round(us * 10) / 10; };
  w.key("operations").begin_array();
  for (const FlightRecord& r : snapshot()) {
    w.begin_object().member("id", r.id).member("seq", r.seq).member("collective", to_string(r.collective));
    w.member("bytes", r.bytes).member("dtype", to_string(r.dtype)).member("op", to_string(r.op));
    w.member("root", r.root).member("steps_done", r.steps_done).member("steps_total", r.steps_total);
    w.member("start_us", tenths(r.start_us)).member("end_us", tenths(r.end_us));
    w.member("algorithm", r.algorithm).member("state", state_name(r.state));
    if (!r.error.empty()) w.member("error", r.error);
    w.end_object();
  }
  w.end_array();
}

}  // namespace comm::detail
