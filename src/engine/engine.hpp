#pragma once
// Engines: one per execution style, created once per communicator from what
// its transport offers, and chosen per call together with the algorithm.
//
//   host      a schedule over a host point-to-point transport (posted and
//             progressed by the Execution), also for send/recv
//   stream    a schedule enqueued on a CUDA stream (Transport::stream_engine())
//   native    a transport's own collective (Transport::native())
//   direct    ranks of one host reduce straight out of each other's memory
//             (a transport offering peer memory; see the shm transport)
//
// The communicator numbers the operation, hands it to the engine, and from
// then on only advances op.run (if the engine left the operation running),
// waits through the engine, and handles failure in one place.

#include "engine/operation.hpp"
#include "engine/plan_cache.hpp"

#include <comm/transport.hpp>

#include <cstddef>
#include <memory>
#include <string_view>

namespace comm::detail {

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string_view name() const noexcept = 0;
  // Usage checks that need the engine (a native collective refusing a dtype),
  // run before the operation is numbered; throws a usage comm::Error.
  virtual void check(const Call&, std::string_view /*algorithm*/) const {}
  // Begins `op` (numbered, algorithm resolved). Returns with op.state done, or
  // still running with op.run set; the communicator then advances op.run.
  // Throws comm::Error on failure (the communicator records it).
  virtual void start(Operation& op, const Call& call) = 0;
  // Sleeps until a running operation of this engine may make headway, `until`
  // passes, or interrupt() is called.
  virtual void wait(Clock::time_point until) = 0;
  // Wakes wait(); any thread.
  virtual void interrupt() noexcept = 0;
};

// Schedules over the transport's point-to-point operations.
// `bytes_sent` (one counter per peer, or null) counts each completed send's payload.
std::unique_ptr<Engine> make_host_engine(Transport& t, PlanCache& plans, int world_size, std::size_t chunk_bytes,
                                         std::uint64_t* bytes_sent = nullptr);
// Schedules enqueued on a CUDA stream by the transport's StreamEngine.
std::unique_ptr<Engine> make_stream_engine(Transport& t, StreamEngine& streams, PlanCache& plans, int world_size,
                                           std::size_t chunk_bytes);
// The transport's own collectives (and, for stream-ordered transports, send/recv).
std::unique_ptr<Engine> make_native_engine(Transport& t, NativeCollectives& native);

}  // namespace comm::detail
