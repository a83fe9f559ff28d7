#pragma once
// The communicator's private state and engine: creation (store namespace,
// transport, link exchange, selector), plans, operation lifecycle, progress,
// waiting, failure, and the flight recorder. communicator_api.cpp validates
// the public calls and turns each into a Call.

#include "algorithms/algorithm.hpp"
#include "engine/executor.hpp"
#include "diag/flight_recorder.hpp"
#include "select/selector.hpp"

#include <comm/communicator.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace comm::detail {

using Clock = std::chrono::steady_clock;

// One validated call, transport-independent.
struct Call {
  Collective collective = Collective::allreduce;
  const void* input = nullptr;
  void* output = nullptr;
  std::size_t count = 0;      // AlgoArgs::count convention (algorithm.hpp)
  std::size_t in_bytes = 0;   // whole input buffer
  std::size_t out_bytes = 0;  // whole output buffer
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;               // broadcast/reduce root; send/recv peer
  MemoryKind memory = MemoryKind::host;
  const CallOptions* options = nullptr;
  std::span<const std::size_t> send_counts, send_displs, recv_counts, recv_displs;
  bool internal = false;      // the library's own traffic (consistency check): own tag space
};

void register_live(const CommunicatorImpl* c);
void unregister_live(const CommunicatorImpl* c) noexcept;

// Scratch memory reused across operations (page faults on fresh large
// buffers would otherwise dominate large collectives).
class ScratchPool {
 public:
  struct Lease {
    std::unique_ptr<std::byte[]> data;
    std::size_t size = 0;
  };
  Lease acquire(std::size_t bytes);
  void release(Lease lease) noexcept;

 private:
  std::vector<Lease> free_;
};

struct Operation {
  CommunicatorImpl* comm = nullptr;  // null once the communicator is gone
  std::uint64_t id = 0;              // this rank's operation number
  std::uint64_t seq = 0;             // collective sequence number (tag space)
  Collective collective = Collective::allreduce;
  std::string_view algorithm;        // points into the selector's names (or a literal)
  std::size_t bytes = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = -1;
  Clock::time_point started{}, deadline{};
  std::chrono::milliseconds timeout{0};
  std::unique_ptr<Execution> exec;
  std::vector<std::byte> input_copy;  // snapshot of an input that overlapped the output
  ScratchPool::Lease scratch;
  void* avg_data = nullptr;           // divide by world size on success (ReduceOp::avg)
  std::size_t avg_count = 0;
  enum class State { running, done, failed } state = State::running;
  ErrorCode code = ErrorCode::internal;
  std::string message;

  std::string describe() const;  // "allreduce #42 (ring, 4096 B f32 sum)"
};

class CommunicatorImpl {
 public:
  static std::unique_ptr<CommunicatorImpl> create(const Config& config, std::shared_ptr<Store> base);
  ~CommunicatorImpl();

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  const Config& config() const noexcept { return config_; }
  Transport& transport() noexcept { return *transport_; }
  const PeerTable& peers() const noexcept { return *peers_; }
  Selector& selector() noexcept { return *selector_; }
  const LinkMatrix& links() const noexcept { return selector_->links(); }
  const std::shared_ptr<Store>& store() const noexcept { return store_; }

  std::shared_ptr<Operation> start(const Call& call);
  // Progresses until `op` is no longer running or `limit` passes; throws the
  // operation's error if it failed. Returns true if it completed.
  bool wait(Operation& op, std::optional<Clock::time_point> limit = std::nullopt);
  bool test(Operation& op);

  void abort() noexcept;
  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  std::unique_ptr<CommunicatorImpl> split(int color, int key);
  // The flight recorder as JSON; `reason` says why it is dumped.
  std::string flight_recorder_json(const std::string& reason = "request") const;
  // Writes the dump to Config::dump_dir (if set) or stderr; never throws.
  void dump_flight_recorder(const std::string& reason) const noexcept;

  // Resolves the algorithm name a call will run (per-call name, override, cost model).
  std::string_view resolve_algorithm(const Call& call);
  static std::size_t selection_bytes(const Call& call) { return std::max(call.in_bytes, call.out_bytes); }

 private:
  CommunicatorImpl() = default;
  void check_usable() const;
  std::shared_ptr<const Schedule> plan(const algo::Algorithm& a, const algo::AlgoArgs& args);
  bool progress_all();
  void finish(Operation& op);
  void fail_all(ErrorCode code, const std::string& message, Operation* culprit) noexcept;
  void check_deadlines(Clock::time_point now);
  void throw_if_failed(const Operation& op) const;
  void check_consistency(const Call& call, std::string_view algorithm);
  std::shared_ptr<Operation> acquire_operation();
  std::shared_ptr<Operation> run_native(std::shared_ptr<Operation> op, const Call& call);
  std::shared_ptr<Operation> run_streamed(std::shared_ptr<Operation> op, const Call& call,
                                          const algo::Algorithm& a, const algo::AlgoArgs& args);

  Config config_;
  int rank_ = 0;
  int size_ = 1;
  std::shared_ptr<Store> base_store_;
  std::shared_ptr<Store> store_;
  std::shared_ptr<const PeerTable> peers_;
  std::unique_ptr<Transport> transport_;
  TransportCaps caps_;
  std::unique_ptr<Selector> selector_;
  std::uint64_t next_id_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t next_internal_seq_ = 0;
  std::uint64_t splits_ = 0;
  std::uint64_t generation_ = 0;  // which communicator of this store this is
  std::vector<std::shared_ptr<Operation>> active_;
  using PlanKey = std::tuple<const algo::Algorithm*, std::size_t, std::size_t, int, std::size_t>;
  std::map<PlanKey, std::shared_ptr<const Schedule>> plans_;
  // Most recently used plans, checked before the map: decode loops repeat a few sizes.
  std::array<std::pair<PlanKey, std::shared_ptr<const Schedule>>, 4> recent_plans_{};
  std::size_t recent_next_ = 0;
  // Operations the user no longer holds are reused (with their Execution arrays).
  std::vector<std::shared_ptr<Operation>> operation_pool_;
  ScratchPool scratch_pool_;
  void* stream_scratch_ = nullptr;
  std::size_t stream_scratch_bytes_ = 0;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> failed_{false};
  mutable std::mutex failure_mu_;
  std::string first_error_;
  FlightRecorder recorder_;
};

}  // namespace comm::detail
