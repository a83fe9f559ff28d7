// The native engine: a transport's own collectives (Gloo's, NCCL's), and
// send/recv of stream-ordered transports. Host transports return when the
// collective completed, stream-ordered ones when it is enqueued.

#include "engine/engine.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace comm::detail {
namespace {

class NativeEngine final : public Engine {
 public:
  NativeEngine(Transport& t, NativeCollectives& native) : transport_(t), native_(native) {}

  std::string_view name() const noexcept override { return "native"; }

  void check(const Call& call, std::string_view algorithm) const override {
    std::string why;
    if (!native_.supports(args(call, std::chrono::milliseconds{0}, 0), algorithm, &why))
      throw Error(ErrorCode::unsupported, std::string(to_string(call.collective)) + " (" + std::string(algorithm) +
                                              " on transport '" + std::string(transport_.name()) + "'): " + why);
  }

  void start(Operation& op, const Call& call) override {
    CollectiveArgs a = args(call, op.timeout, op.seq);
    // Native collectives are taken in place only where their libraries
    // promise it (allreduce, broadcast); otherwise the input is copied first.
    const bool exact_ok = call.collective == Collective::allreduce || call.collective == Collective::broadcast;
    a.send = call.input_for(exact_ok, input_copy_);
    native_.run(a, op.algorithm);
    input_copy_ = {};
    op.state = Operation::State::done;
  }

  void wait(Clock::time_point until) override { transport_.wait(until); }
  void interrupt() noexcept override { transport_.interrupt(); }

 private:
  // CollectiveArgs' arrays are null, not empty, when the collective has none.
  static const std::size_t* data_or_null(std::span<const std::size_t> v) { return v.empty() ? nullptr : v.data(); }

  static CollectiveArgs args(const Call& call, std::chrono::milliseconds timeout, std::uint64_t seq) {
    return CollectiveArgs{.collective = call.collective, .send = call.input, .recv = call.output, .count = call.count,
                          .dtype = call.dtype, .op = call.op, .root = call.root,
                          .send_counts = data_or_null(call.send_counts), .send_displs = data_or_null(call.send_displs),
                          .recv_counts = data_or_null(call.recv_counts), .recv_displs = data_or_null(call.recv_displs),
                          .memory = call.memory, .stream = call.options ? call.options->stream : nullptr,
                          .timeout = timeout, .sequence = seq};
  }

  Transport& transport_;
  NativeCollectives& native_;
  std::vector<std::byte> input_copy_;  // of an input overlapping the output, during run()
};

}  // namespace

std::unique_ptr<Engine> make_native_engine(Transport& t, NativeCollectives& native) {
  return std::make_unique<NativeEngine>(t, native);
}

}  // namespace comm::detail
