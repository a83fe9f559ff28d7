#pragma once
// The flight recorder: each rank remembers its last N operations (what, how
// big, which algorithm, how far they got, how long they took, how they
// ended) so a hang or failure can be explained after the fact.
//
// The communicator's thread is its only writer (a Communicator is used from
// one thread at a time); a dump may read it from any thread. Every entry is a
// sequence lock: the writer makes the entry's version odd, stores the fields,
// makes it even again; a reader copies the fields and keeps the copy only if
// it saw the same even version before and after. The writer thus takes no
// lock and executes no locked instruction. That matters on the direct-memory
// path, where a record is written right after this rank stored its flag: a
// locked instruction there waits until that store owns its cache line, which
// the spinning peer holds. An error message, written only when an operation
// fails, is the one part kept under a lock.

#include "util/coarse_clock.hpp"
#include "util/json.hpp"

#include <comm/types.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace comm::detail {

enum class OpState : std::uint8_t { posted, done, failed };

// One operation as a dump reads it.
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
  ~FlightRecorder();
  // Keeps the last `capacity` operations, rounded up to a power of two (the
  // slot of an operation is then a mask of its id, not a division). Before
  // the recorder is shared: nothing may read it meanwhile.
  void resize(std::size_t capacity);
  // The writer's side (the communicator's thread).
  // A new operation, posted (its entry is written in place: this runs on every
  // call, also on the direct-memory fast path); or one recorded only once it
  // finished (`state` done: it took less than the recorder's clock resolves).
  void post(std::uint64_t id, std::uint64_t seq, Collective collective, std::string_view algorithm, std::size_t bytes,
            DataType dtype, ReduceOp op, int root, double start_us, OpState state = OpState::posted);
  void update(std::uint64_t id, OpState state, std::size_t steps_done, std::size_t steps_total,
              std::string_view error = {});
  // Operation `id`, posted, is done (one step of one) at `end_us`: two stores.
  // Its entry is settled by the writer's next post or update, and a reader
  // sees it done meanwhile. For the direct-memory repeat path, where an
  // entry's update would sit between the peers' data arriving and the caller
  // getting its result (8 B, 2 ranks over shm, timed in one job against the
  // update, blocks alternating: 9-18 ns of ~165).
  void finish(std::uint64_t id, double end_us) noexcept {
    finished_end_us_.store(end_us, std::memory_order_relaxed);
    finished_.store(id + 1, std::memory_order_release);
  }
  // From any thread: the last operations, oldest first.
  std::vector<FlightRecord> snapshot() const;
  // Writes the member "operations": [...] (oldest first) into the object `w` is in.
  void write_operations(json::Writer& w) const;
  double now_us() const { return us_at(util::coarse_now()); }
  // Microseconds from the recorder's epoch to `t` (a util::coarse_now() reading).
  double us_at(std::chrono::steady_clock::time_point t) const {
    return std::chrono::duration<double, std::micro>(t - epoch_).count();
  }

 private:
  struct Entry;  // one FlightRecord's fields as atomics, with its version
  // Makes the entry's version odd (being written) and back to even.
  static void begin_write(Entry& e) noexcept;
  static void end_write(Entry& e) noexcept;
  // The entry's fields (but the error message) as they stood at its even
  // `version`; false if it was being written.
  static bool read(const Entry& e, FlightRecord& r, std::uint64_t& version, bool& has_error) noexcept;
  // update() without settling first, ending at `end_us` (unused for posted).
  void write_update(std::uint64_t id, OpState state, std::size_t steps_done, std::size_t steps_total, double end_us,
                    std::string_view error);
  // The writer's side of finish(): the finished operation's entry, updated.
  void settle();

  // finish()'s operation id + 1 (0: none) and its end, until settle().
  std::atomic<std::uint64_t> finished_{0};
  std::atomic<double> finished_end_us_{-1};

  std::unique_ptr<Entry[]> ring_;
  std::uint64_t mask_ = 0;  // the ring's size - 1
  std::atomic<std::uint64_t> recorded_{0};
  mutable std::mutex errors_mu_;
  std::vector<std::string> errors_;  // by entry, under errors_mu_
  // The clock the stamps are read from (coarse): a precise epoch would be up
  // to a tick ahead of them and make the first stamps negative.
  std::chrono::steady_clock::time_point epoch_ = util::coarse_now();
};

}  // namespace comm::detail
