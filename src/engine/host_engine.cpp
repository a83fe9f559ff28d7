// The host engine: a schedule over a host point-to-point transport, run by
// the Execution; also send/recv as one-step schedules.

#include "engine/engine.hpp"
#include "engine/executor.hpp"
#include "engine/reduce_kernels.hpp"
#include "engine/tags.hpp"

#include <cstring>

namespace comm::detail {
namespace {

// One operation of the host engine: the Execution plus what the call needs
// around it (an input copy, scratch, the avg division at the end).
class ScheduleRun final : public Run {
 public:
  ScheduleRun(Transport& t, ScratchPool& pool, std::uint64_t* bytes_sent) : exec_(t, bytes_sent), pool_(pool) {}

  void start(std::shared_ptr<const Schedule> schedule, const Call& call, std::uint64_t tag_base, int world_size) {
    const std::size_t esize = dtype_size(call.dtype);
    // Schedules take exact aliasing (AlgoArgs::in_place); any other overlap
    // would overwrite input still to be read, so that input is copied first.
    ExecBuffers bufs{static_cast<const std::byte*>(call.input_for(true, input_copy_)),
                     static_cast<std::byte*>(call.output), nullptr};
    if (schedule->scratch_count) {
      scratch_ = pool_.acquire(schedule->scratch_count * esize);
      bufs.scratch = scratch_.data.get();
    }
    avg_data_ = nullptr;
    avg_count_ = 0;
    if (call.op == ReduceOp::avg && call.output &&
        (call.collective == Collective::allreduce || call.collective == Collective::reduce_scatter ||
         call.collective == Collective::reduce)) {
      avg_data_ = call.output;
      avg_count_ = call.out_bytes / esize;
    }
    dtype_ = call.dtype;
    world_size_ = world_size;
    finished_ = false;
    exec_.start(std::move(schedule), bufs, call.dtype, call.op, tag_base);
  }

  bool advance() override {
    const bool moved = exec_.advance();
    if (!finished_ && exec_.done()) {
      if (avg_data_ && avg_count_) kernels::finish_avg(avg_data_, avg_count_, dtype_, world_size_);
      pool_.release(std::move(scratch_));
      input_copy_ = {};
      finished_ = true;
    }
    return moved;
  }
  bool done() const noexcept override { return finished_; }
  bool failed() const noexcept override { return exec_.failed(); }
  ErrorCode error_code() const noexcept override { return exec_.error_code(); }
  const std::string& error_message() const noexcept override { return exec_.error_message(); }
  int error_peer() const noexcept override { return exec_.error_peer(); }
  void cancel() noexcept override { exec_.cancel(); }
  std::vector<int> waiting_on() const override { return exec_.waiting_on(); }
  std::size_t steps_done() const noexcept override { return exec_.steps_done(); }
  std::size_t steps_total() const noexcept override { return exec_.steps_total(); }

 private:
  Execution exec_;
  ScratchPool& pool_;
  std::vector<std::byte> input_copy_;
  ScratchPool::Lease scratch_;
  void* avg_data_ = nullptr;
  std::size_t avg_count_ = 0;
  DataType dtype_ = DataType::f32;
  int world_size_ = 1;
  bool finished_ = false;
};

class HostEngine final : public Engine {
 public:
  HostEngine(Transport& t, PlanCache& plans, int world_size, std::size_t chunk_bytes, std::uint64_t* bytes_sent)
      : transport_(t), plans_(plans), world_size_(world_size), chunk_bytes_(chunk_bytes), bytes_sent_(bytes_sent) {}

  std::string_view name() const noexcept override { return "host"; }

  void start(Operation& op, const Call& call) override {
    std::shared_ptr<const Schedule> schedule;
    std::uint64_t tag_base = 0;
    if (call.p2p()) {
      ScheduleBuilder b;
      const bool send = call.collective == Collective::send;
      const Region whole{send ? BufferId::input : BufferId::output, 0, call.count};
      if (send)
        b.send(call.root, whole, 0);
      else
        b.recv(call.root, whole, 0);
      schedule = std::make_shared<const Schedule>(std::move(b).finish());
      tag_base = p2p_tag(call.options ? call.options->tag : 0u);
    } else {
      const algo::Algorithm* a = algo::find_algorithm(call.collective, op.algorithm);
      schedule = plans_.get(*a, algo_args(call, transport_.rank(), world_size_, chunk_bytes_));
      tag_base = collective_tag_base(call.internal ? TagKind::internal : TagKind::collective, op.signature, op.seq);
    }
    if (op.run_owner != this) {
      op.run = std::make_unique<ScheduleRun>(transport_, scratch_, bytes_sent_);
      op.run_owner = this;
    }
    static_cast<ScheduleRun&>(*op.run).start(std::move(schedule), call, tag_base, world_size_);
  }

  void wait(Clock::time_point until) override { transport_.wait(until); }
  void interrupt() noexcept override { transport_.interrupt(); }

 private:
  Transport& transport_;
  PlanCache& plans_;
  ScratchPool scratch_;
  int world_size_;
  std::size_t chunk_bytes_;
  std::uint64_t* bytes_sent_;
};

}  // namespace

std::unique_ptr<Engine> make_host_engine(Transport& t, PlanCache& plans, int world_size, std::size_t chunk_bytes,
                                         std::uint64_t* bytes_sent) {
  return std::make_unique<HostEngine>(t, plans, world_size, chunk_bytes, bytes_sent);
}

}  // namespace comm::detail
