#pragma once
// One call as the core hands it to an engine (Call), the operation it becomes
// (Operation: numbers, deadline, state), and the engine-side state of an
// operation that is still running (Run).

#include <comm/communicator.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace comm::detail {

class CommunicatorImpl;
class Engine;
using Clock = std::chrono::steady_clock;

// One validated call, transport-independent.
struct Call {
  Collective collective = Collective::allreduce;
  const void* input = nullptr;
  void* output = nullptr;
  std::size_t count = 0;      // AlgoArgs::count convention (algorithms/algorithm.hpp)
  std::size_t in_bytes = 0;   // whole input buffer
  std::size_t out_bytes = 0;  // whole output buffer
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;               // broadcast/reduce root; send/recv peer
  MemoryKind memory = MemoryKind::host;
  const CallOptions* options = nullptr;
  std::span<const std::size_t> send_counts, send_displs, recv_counts, recv_displs;
  bool internal = false;      // the library's own traffic (consistency check): own tag space

  bool p2p() const noexcept { return collective == Collective::send || collective == Collective::recv; }
  std::size_t bytes() const noexcept { return in_bytes > out_bytes ? in_bytes : out_bytes; }
  // Input and output are one buffer: same address, same size (AlgoArgs::in_place).
  bool in_place() const noexcept { return input && input == output && in_bytes == out_bytes; }
  // The input an engine runs from: `input`, or a copy of it in `copy` where
  // it overlaps the output in a way the engine cannot take: any overlap,
  // except exact aliasing when `exact_alias_ok`. Host memory only (device
  // buffers are the stream engine's and NCCL's to check).
  const void* input_for(bool exact_alias_ok, std::vector<std::byte>& copy) const {
    const auto* in = static_cast<const std::byte*>(input);
    const auto* out = static_cast<const std::byte*>(output);
    const bool overlap = in && out && in < out + out_bytes && out < in + in_bytes;
    copy.clear();
    if (!overlap || (exact_alias_ok && in_place()) || memory != MemoryKind::host) return input;
    copy.assign(in, in + in_bytes);
    return copy.data();
  }
};

// The engine-side state of a running operation. advance() never blocks.
class Run {
 public:
  virtual ~Run() = default;
  // Does whatever work is possible now; true if anything moved.
  virtual bool advance() = 0;
  virtual bool done() const noexcept = 0;
  virtual bool failed() const noexcept = 0;
  virtual ErrorCode error_code() const noexcept = 0;
  virtual const std::string& error_message() const noexcept = 0;
  // The peer whose message or connection failed it; -1 if none.
  virtual int error_peer() const noexcept = 0;
  // Withdraws everything still posted: the transport no longer touches buffers.
  virtual void cancel() noexcept = 0;
  // Peers this rank still waits on, for timeout messages.
  virtual std::vector<int> waiting_on() const = 0;
  virtual std::size_t steps_done() const noexcept = 0;
  virtual std::size_t steps_total() const noexcept = 0;
};

struct Operation {
  CommunicatorImpl* comm = nullptr;  // null once the communicator is gone
  std::uint64_t id = 0;              // this rank's operation number
  std::uint64_t seq = 0;             // collective sequence number (tag space)
  std::uint64_t signature = 0;       // engine/tags.hpp call_signature
  Collective collective = Collective::allreduce;
  std::string_view algorithm;        // points into the selector's names (or a literal)
  std::size_t bytes = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = -1;
  Clock::time_point started{}, deadline{};
  std::chrono::milliseconds timeout{0};
  Engine* engine = nullptr;          // runs it
  // Engine state while running; kept when done so the next call of the same
  // engine reuses it (and its arrays): the hot path of a repeated small
  // collective allocates nothing. `run_owner` says which engine made it.
  std::unique_ptr<Run> run;
  const Engine* run_owner = nullptr;
  bool stall_checked = false;        // diagnose_stall ran for it
  enum class State { running, done, failed } state = State::running;
  ErrorCode code = ErrorCode::internal;
  std::string message;

  std::string describe() const;  // "allreduce #42 (ring, 4096 B f32 sum)"
};

// Copies what describes a call — its numbers and arguments, not its engine
// state nor its outcome — from `from` into `to`.
inline void copy_call(Operation& to, const Operation& from) {
  to.seq = from.seq;
  to.signature = from.signature;
  to.collective = from.collective;
  to.algorithm = from.algorithm;
  to.bytes = from.bytes;
  to.dtype = from.dtype;
  to.op = from.op;
  to.root = from.root;
}

}  // namespace comm::detail
