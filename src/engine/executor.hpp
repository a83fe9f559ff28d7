#pragma once
// Runs one rank's Schedule over a host Transport: posts every step whose
// dependencies are done, as soon as they are done, and never blocks. The
// communicator calls advance() from its progress loop; waiting (and timeouts)
// belong to the communicator, which owns the transport.

#include <comm/schedule.hpp>
#include <comm/transport.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace comm {

struct ExecBuffers {
  const std::byte* input = nullptr;
  std::byte* output = nullptr;
  std::byte* scratch = nullptr;
};

// Reusable: an operation object keeps its Execution (and its arrays) from one
// call to the next, so the hot path of a repeated small collective allocates nothing.
class Execution {
 public:
  // `bytes_sent`, if given, has one counter per peer; each completed send
  // adds its payload bytes to its peer's counter (Communicator::bytes_sent).
  explicit Execution(Transport& transport, std::uint64_t* bytes_sent = nullptr)
      : transport_(transport), bytes_sent_(bytes_sent) {}
  ~Execution();  // cancels what is still posted
  // Begins running `schedule`; `tag_base` is OR-ed with each step's tag to form the wire tag.
  void start(std::shared_ptr<const Schedule> schedule, ExecBuffers buffers, DataType dtype, ReduceOp op,
             std::uint64_t tag_base);
  Execution(const Execution&) = delete;
  Execution& operator=(const Execution&) = delete;

  // Posts/runs every ready step and harvests completions. Returns true if any
  // step completed. Never blocks. After a failure, failed() is true.
  bool advance();
  bool done() const noexcept { return completed_ == total_ && !failed_; }
  bool failed() const noexcept { return failed_; }
  ErrorCode error_code() const noexcept { return error_code_; }
  const std::string& error_message() const noexcept { return error_message_; }
  // The rank that failed the execution: the one a failed completion names as
  // its cause, else the peer of that message; -1 if none.
  int error_peer() const noexcept { return error_peer_; }
  // Withdraws every posted send/receive (the transport stops touching buffers).
  void cancel() noexcept;

  std::size_t steps_done() const noexcept { return completed_; }
  std::size_t steps_total() const noexcept { return total_; }
  // Peers this rank is still waiting on (pending receives, then pending sends).
  std::vector<int> waiting_on() const;

 private:
  void run_local_step(StepId s);
  void post(StepId s);
  void finish_step(StepId s);
  void fail(ErrorCode code, std::string message, int peer);
  std::byte* address(const Region& r) const;

  std::shared_ptr<const Schedule> schedule_;
  Transport& transport_;
  std::uint64_t* bytes_sent_ = nullptr;
  ExecBuffers buffers_;
  DataType dtype_ = DataType::f32;
  ReduceOp op_ = ReduceOp::sum;
  std::size_t esize_ = 4;
  std::uint64_t tag_base_ = 0;
  std::unique_ptr<Completion[]> completions_;
  std::size_t completions_capacity_ = 0;
  std::vector<std::uint32_t> missing_deps_;
  std::vector<StepId> ready_;
  std::vector<StepId> in_flight_;
  std::size_t completed_ = 0;
  std::size_t total_ = 0;
  bool failed_ = false;
  ErrorCode error_code_ = ErrorCode::internal;
  std::string error_message_;
  int error_peer_ = -1;
};

}  // namespace comm
