// A transport's own all-reduce whose calibrated curve (up to 4 MiB) would be
// extended to the last timed size and chosen there is timed there first
// (core/algorithm_timing.cpp time_native_choice).
#include "engine/reduce_kernels.hpp"
#include "select/timing_plan.hpp"
#include "select/tuning_file.hpp"
#include "local_group.hpp"
#include "select_fixtures.hpp"

#include <comm/comm.hpp>
#include <comm/log.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>

using namespace comm;

namespace {

// Its f32 all-reduce, the one calibration times, costs nothing up to 4 MiB
// (where native calibration ends) and kSlow from kLargestTimed on: extended,
// its curve calls it the fastest there by far. It moves no f32 data (no one
// reads calibration's results); the i32 and f64 all-reduces through which the
// ranks agree while they calibrate, it exchanges through the transport it
// belongs to (2 ranks) and reduces.
class SlowPastCurve : public NativeCollectives {
 public:
  static constexpr auto kSlow = std::chrono::milliseconds(60);
  explicit SlowPastCurve(Transport& t) : t_(t) {}
  std::vector<std::string> algorithms(Collective c) const override {
    return c == Collective::allreduce ? std::vector<std::string>{"native"} : std::vector<std::string>{};
  }
  bool supports(const CollectiveArgs&, std::string_view, std::string*) const override { return t_.size() == 2; }
  double predict_us(Collective, std::string_view, std::size_t) const override { return -1; }
  void run(const CollectiveArgs& args, std::string_view) override {
    const std::size_t bytes = args.count * dtype_size(args.dtype);
    if (args.dtype == DataType::f32) {
      if (bytes >= kLargestTimed) std::this_thread::sleep_for(kSlow);
      return;
    }
    std::vector<std::byte> theirs(bytes);
    // A signature no collective has (detail/tags.hpp): never one of comm's messages.
    const std::uint64_t tag = (std::uint64_t{0x3fff} << 32) | ((calls_++ & 0xffff) << 16);
    Completion sent, received;
    t_.irecv(1 - t_.rank(), tag, theirs.data(), bytes, received);
    t_.isend(1 - t_.rank(), tag, args.send, bytes, sent);
    while (sent.is_pending() || received.is_pending())
      if (!t_.progress()) t_.wait(std::chrono::steady_clock::now() + std::chrono::milliseconds(1));
    kernels::reduce(args.recv, args.send, theirs.data(), args.count, args.dtype, args.op);
  }

 private:
  Transport& t_;
  std::uint64_t calls_ = 0;
};

// The local transport with SlowPastCurve as its own collectives.
class WithSlowNative : public Transport {
 public:
  explicit WithSlowNative(std::unique_ptr<Transport> inner) : inner_(std::move(inner)), native_(*inner_) {}
  std::string_view name() const noexcept override { return "slow_native"; }
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  TransportCaps caps() const noexcept override { return inner_->caps(); }
  LinkInfo link(int peer) const override { return inner_->link(peer); }
  void isend(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Completion& c) override {
    inner_->isend(peer, tag, data, bytes, c);
  }
  void irecv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Completion& c) override {
    inner_->irecv(peer, tag, data, bytes, c);
  }
  bool progress() override { return inner_->progress(); }
  void wait(std::chrono::steady_clock::time_point deadline) override { inner_->wait(deadline); }
  void interrupt() noexcept override { inner_->interrupt(); }
  void cancel(Completion& c) noexcept override { inner_->cancel(c); }
  NativeCollectives* native() noexcept override { return &native_; }

 private:
  std::unique_ptr<Transport> inner_;
  SlowPastCurve native_;
};

}  // namespace

TEST_CASE("a transport's own all-reduce chosen at the last size by its curve's extension is timed there first") {
  register_transport("slow_native", [](const TransportInit& init) -> std::unique_ptr<Transport> {
    return std::make_unique<WithSlowNative>(create_transport("local", init));
  });
  char dir[] = "/tmp/comm-native-timing-XXXXXX";
  REQUIRE(::mkdtemp(dir));
  Config cfg;
  cfg.transport = "slow_native";
  cfg.tuning_file = std::string(dir) + "/tuning.json";
  cfg.calibration_busy_limit = 1;  // saved even on a busy machine
  cfg.log_level = LogLevel::info;  // what calibration says about it
  std::mutex mu;
  std::string said;
  set_log_sink([&](LogLevel, std::string_view, std::string_view line) {
    if (line.find("'native' (the transport's own), chosen at") == std::string_view::npos) return;
    std::lock_guard lk(mu);
    said += std::string(line) + "\n";
  });
  std::string chosen[2];
  test::run_local(
      2, cfg,
      [&](Communicator& c) { chosen[c.rank()] = c.algorithm_for(Collective::allreduce, kLargestTimed); },
      /*calibrate=*/true);
  set_log_sink(nullptr);
  LinkMatrix links = test::uniform_links(2, LinkKind::shm, 1.0, 1.0);
  ComputeParams compute;
  TuningExtras saved;
  REQUIRE(load_tuning(cfg.tuning_file, links, compute, &saved));
  std::remove(cfg.tuning_file.c_str());
  ::rmdir(dir);
  const NativeCurve* curve = saved.native.find(Collective::allreduce, "native");
  REQUIRE(curve);
  INFO("chosen at the last size: " << chosen[0] << "; calibration said:\n" << said);
  CHECK(chosen[1] == chosen[0]);
  REQUIRE_FALSE(said.empty());
  if (said.find("not timed there: calibration at") != std::string::npos) {
    // Only where calibration (a sanitizer's build, a loaded machine) has
    // already run past its cap: it says so, and the curve stays as it was.
    MESSAGE("calibration ran past its cap before the last size; the timing there is not exercised: " << said);
    CHECK(said.find("of at most " + std::to_string(static_cast<long>(kCalibrationCapUs / 1000)) + " ms") !=
          std::string::npos);
    CHECK(curve->points.back().first < kLargestTimed);
    return;
  }
  // Timed where it would have been chosen, at its true cost, and not chosen.
  REQUIRE(curve->points.back().first == kLargestTimed);
  CHECK(curve->points.back().second >= std::chrono::duration<double, std::micro>(SlowPastCurve::kSlow).count());
  CHECK(chosen[0] != "native");
}
