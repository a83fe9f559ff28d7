// The stream engine: a schedule enqueued on a CUDA stream by the transport's
// StreamEngine (NCCL: grouped send/recv plus reduction kernels). An operation
// is complete once enqueued; the host is never synchronised.

#include "engine/engine.hpp"

namespace comm::detail {
namespace {

// Schedules enqueued on a CUDA stream: complete once enqueued.
class StreamScheduleEngine final : public Engine {
 public:
  StreamScheduleEngine(Transport& t, StreamEngine& streams, PlanCache& plans, int world_size,
                       std::size_t chunk_bytes)
      : transport_(t), streams_(streams), plans_(plans), world_size_(world_size), chunk_bytes_(chunk_bytes) {}
  ~StreamScheduleEngine() override {
    if (scratch_) streams_.release_scratch(scratch_);
  }

  std::string_view name() const noexcept override { return "stream"; }

  void start(Operation& op, const Call& call) override {
    const algo::Algorithm* a = algo::find_algorithm(call.collective, op.algorithm);
    const auto args = algo_args(call, transport_.rank(), world_size_, chunk_bytes_);
    const auto schedule = plans_.get(*a, args);
    const std::size_t bytes = schedule->scratch_count * args.elem_size;
    if (bytes > scratch_bytes_) {
      if (scratch_) streams_.release_scratch(scratch_);
      scratch_ = nullptr;
      scratch_bytes_ = 0;
      scratch_ = streams_.allocate_scratch(bytes);
      scratch_bytes_ = bytes;
    }
    const ScheduleBuffers bufs{call.input, call.output, scratch_};
    streams_.enqueue(*schedule, bufs, call.dtype, call.op, world_size_, op.seq,
                     call.options ? call.options->stream : nullptr);
    op.state = Operation::State::done;
  }

  void wait(Clock::time_point until) override { transport_.wait(until); }
  void interrupt() noexcept override { transport_.interrupt(); }

 private:
  Transport& transport_;
  StreamEngine& streams_;
  PlanCache& plans_;
  int world_size_;
  std::size_t chunk_bytes_;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Engine> make_stream_engine(Transport& t, StreamEngine& streams, PlanCache& plans, int world_size,
                                           std::size_t chunk_bytes) {
  return std::make_unique<StreamScheduleEngine>(t, streams, plans, world_size, chunk_bytes);
}

}  // namespace comm::detail
