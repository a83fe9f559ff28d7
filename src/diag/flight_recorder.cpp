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

FlightRecorder::FlightRecorder(std::size_t capacity) { resize(capacity); }

void FlightRecorder::resize(std::size_t capacity) {
  std::lock_guard lk(mu_);
  ring_.assign(std::bit_ceil(std::max<std::size_t>(capacity, 1)), FlightRecord{});
  mask_ = ring_.size() - 1;
  recorded_ = 0;
}

// Millisecond resolution is plenty for explaining hangs, and the coarse clock
// keeps two clock reads per operation off the hot path (util/coarse_clock.hpp).
void FlightRecorder::post(std::uint64_t id, std::uint64_t seq, Collective collective, std::string_view algorithm,
                          std::size_t bytes, DataType dtype, ReduceOp op, int root, double start_us,
                          OpState state) {
  std::lock_guard lk(mu_);
  FlightRecord& r = ring_[id & mask_];
  r.id = id;
  r.seq = seq;
  r.collective = collective;
  r.algorithm = algorithm;
  r.bytes = bytes;
  r.dtype = dtype;
  r.op = op;
  r.root = root;
  r.state = state;
  r.steps_done = r.steps_total = state == OpState::done ? 1 : 0;
  r.start_us = start_us;
  r.end_us = state == OpState::posted ? -1 : start_us;
  r.error.clear();
  ++recorded_;
}

void FlightRecorder::update(std::uint64_t id, OpState state, std::size_t steps_done,
                            std::size_t steps_total, std::string_view error) {
  std::lock_guard lk(mu_);
  FlightRecord& r = ring_[id & mask_];
  if (r.id != id) return;  // overwritten by a newer operation
  r.state = state;
  r.steps_done = steps_done;
  r.steps_total = steps_total;
  if (state != OpState::posted) r.end_us = now_us();
  if (!error.empty()) r.error = error;
}

void FlightRecorder::write_operations(json::Writer& w) const {
  // Tenths of a microsecond are all a timeline needs; the rest is noise.
  const auto tenths = [](double us) { return std::round(us * 10) / 10; };
  std::lock_guard lk(mu_);
  w.key("operations").begin_array();
  const std::uint64_t n = std::min<std::uint64_t>(recorded_, ring_.size());
  const std::uint64_t first = recorded_ - n;
  for (std::uint64_t k = 0; k < n; ++k) {
    const FlightRecord& r = ring_[(first + k) & mask_];
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
