#include "diag/flight_recorder.hpp"
#include "util/c_locale.hpp"

#include "select/tuning_file.hpp"

#include <cstdio>

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
  ring_.assign(std::max<std::size_t>(capacity, 1), FlightRecord{});
  recorded_ = 0;
}

double FlightRecorder::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - epoch_).count();
}

void FlightRecorder::record(const FlightRecord& r) {
  std::lock_guard lk(mu_);
  ring_[r.id % ring_.size()] = r;
  ++recorded_;
}

void FlightRecorder::update(std::uint64_t id, OpState state, std::size_t steps_done,
                            std::size_t steps_total, const std::string& error) {
  std::lock_guard lk(mu_);
  FlightRecord& r = ring_[id % ring_.size()];
  if (r.id != id) return;  // overwritten by a newer operation
  r.state = state;
  r.steps_done = steps_done;
  r.steps_total = steps_total;
  if (state != OpState::posted) r.end_us = now_us();
  if (!error.empty()) r.error = error;
}

std::string FlightRecorder::json(const std::string& header) const {
  std::lock_guard lk(mu_);
  std::string out = "{" + header + ",\"operations\":[";
  const std::uint64_t n = std::min<std::uint64_t>(recorded_, ring_.size());
  const std::uint64_t first = recorded_ - n;
  char buf[256];
  for (std::uint64_t k = 0; k < n; ++k) {
    const FlightRecord& r = ring_[(first + k) % ring_.size()];
    std::snprintf(buf, sizeof buf,
                  "%s{\"id\":%llu,\"seq\":%llu,\"collective\":\"%s\",\"bytes\":%zu,\"dtype\":\"%s\","
                  "\"op\":\"%s\",\"root\":%d,\"steps_done\":%zu,\"steps_total\":%zu,\"start_us\":%s,"
                  "\"end_us\":%s,",
                  k ? "," : "", static_cast<unsigned long long>(r.id), static_cast<unsigned long long>(r.seq),
                  std::string(to_string(r.collective)).c_str(), r.bytes, std::string(to_string(r.dtype)).c_str(),
                  std::string(to_string(r.op)).c_str(), r.root, r.steps_done, r.steps_total,
                  util::fixed(r.start_us, 1).c_str(), util::fixed(r.end_us, 1).c_str());
    out += buf;
    out += "\"algorithm\":" + json::quote(r.algorithm) + ",\"state\":\"" + state_name(r.state) + "\"";
    if (!r.error.empty()) out += ",\"error\":" + json::quote(r.error);
    out += "}";
  }
  out += "]}";
  return out;
}

}  // namespace comm::detail
