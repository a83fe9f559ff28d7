#pragma once
// The flight recorder: each rank remembers its last N operations (what, how
// big, which algorithm, how far they got, how long they took, how they
// ended) so a hang or failure can be explained after the fact.

#include "util/coarse_clock.hpp"
#include "util/spin_lock.hpp"
#include "util/json.hpp"

#include <comm/types.hpp>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace comm::detail {

enum class OpState : std::uint8_t { posted, done, failed };

struct FlightRecord {
  std::uint64_t id = 0;
  std::uint64_t seq = 0;
  Collective collective = Collective::allreduce;
  std::string_view algorithm;  // the communicator's names outlive its recorder entries
  std::size_t bytes = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = -1;
  OpState state = OpState::posted;
  std::size_t steps_done = 0;
  std::size_t steps_total = 0;
  double start_us = 0;
  double end_us = -1;
  std::string error;
};

class FlightRecorder {
 public:
  explicit FlightRecorder(std::size_t capacity = 256);
  // Keeps the last `capacity` operations, rounded up to a power of two (the
  // slot of an operation is then a mask of its id, not a division).
  void resize(std::size_t capacity);
  // Thread safe (the recorder may be dumped from a signal-handling thread).
  // A new operation, posted (its entry is written in place: this runs on every
  // call, also on the direct-memory fast path); or one recorded only once it
  // finished (`state` done: it took less than the recorder's clock resolves).
  void post(std::uint64_t id, std::uint64_t seq, Collective collective, std::string_view algorithm, std::size_t bytes,
            DataType dtype, ReduceOp op, int root, double start_us, OpState state = OpState::posted);
  void update(std::uint64_t id, OpState state, std::size_t steps_done, std::size_t steps_total,
              std::string_view error = {});
  // Writes the member "operations": [...] (oldest first) into the object `w` is in.
  void write_operations(json::Writer& w) const;
  double now_us() const { return us_at(util::coarse_now()); }
  // Microseconds from the recorder's epoch to `t` (a util::coarse_now() reading).
  double us_at(std::chrono::steady_clock::time_point t) const {
    return std::chrono::duration<double, std::micro>(t - epoch_).count();
  }

 private:
  mutable util::SpinLock mu_;
  std::vector<FlightRecord> ring_;
  std::uint64_t mask_ = 0;  // ring_.size() - 1
  std::uint64_t recorded_ = 0;
  // The clock the stamps are read from (coarse): a precise epoch would be up
  // to a tick ahead of them and make the first stamps negative.
  std::chrono::steady_clock::time_point epoch_ = util::coarse_now();
};

}  // namespace comm::detail
