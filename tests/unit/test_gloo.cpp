// Gloo transport internals: how Gloo's exceptions become comm::Errors, and
// the transport plus Gloo's native collectives with ranks as threads of this
// process (each with its own Gloo device, over loopback). Built only when Gloo
// is enabled.
#include "transports/gloo/gloo_transport.hpp"

#include "core/access.hpp"
#include "local_group.hpp"

#include <gloo/common/error.h>
#include <gloo/common/logging.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using comm::Error;
using comm::ErrorCode;
using comm::gloo_detail::translate_current_exception;

namespace {

template <class E>
Error translated(const E& thrown) {
  try {
    throw thrown;
  } catch (...) {
    return translate_current_exception("op #7");
  }
}

comm::Config gloo_config() {
  comm::Config cfg;
  cfg.transport = "gloo";
  cfg.timeout = std::chrono::seconds(20);
  return cfg;
}

}  // namespace

TEST_CASE("gloo exceptions map to error codes and keep Gloo's text") {
  const Error t = translated(gloo::IoException("[pair.cc:81] Timed out waiting 2000ms for recv operation to complete"));
  CHECK(t.code() == ErrorCode::timeout);
  CHECK(std::string(t.what()).find("op #7: ") == 0);
  CHECK(std::string(t.what()).find("Timed out waiting 2000ms") != std::string::npos);
  CHECK(translated(gloo::IoException("Connection closed by peer [127.0.0.1]:4242")).code() == ErrorCode::peer_failed);
  CHECK(translated(gloo::IoException("Read error [::1]:9: Connection reset by peer")).code() ==
        ErrorCode::peer_failed);
  CHECK(translated(gloo::IoException("Application timeout caused pair closure")).code() == ErrorCode::timeout);
  CHECK(translated(gloo::IoException("socket: Too many open files")).code() == ErrorCode::transport_failure);
  CHECK(translated(gloo::InvalidOperationException("address family mismatch")).code() ==
        ErrorCode::transport_failure);
  // EnforceNotMet is not a gloo::Exception; it must still be caught and named.
  const Error e = translated(gloo::EnforceNotMet("pair.cc", 1, "a <= b", "recv too small"));
  CHECK(e.code() == ErrorCode::transport_failure);
  CHECK(std::string(e.what()).find("recv too small") != std::string::npos);
  CHECK(translated(std::runtime_error("boom")).code() == ErrorCode::transport_failure);
  // Our own errors pass through unchanged.
  const Error ours = translated(Error(ErrorCode::store_failure, "store gone"));
  CHECK(ours.code() == ErrorCode::store_failure);
  CHECK(std::string(ours.what()) == "store gone");
}

TEST_CASE("gloo transport: links, native algorithms and their limits") {
  comm::test::run_local(2, gloo_config(), [](comm::Communicator& c) {
    auto& native = *comm::detail::Access::impl(c).transport().native();
    CHECK(native.algorithms(comm::Collective::allreduce) == std::vector<std::string>{"native", "native_bcube"});
    CHECK(native.algorithms(comm::Collective::reduce_scatter).empty());
    CHECK(native.predict_us(comm::Collective::allreduce, "native", 1 << 20) < 0);
    const comm::LinkInfo link = comm::detail::Access::impl(c).transport().link(1 - c.rank());
    CHECK(link.kind == comm::LinkKind::tcp);
    CHECK(link.detail == "gloo tcp 127.0.0.1 (same host)");

    // all_to_allv only with packed blocks.
    const std::size_t counts[] = {1, 2}, packed[] = {0, 1}, gaps[] = {0, 4};
    comm::CollectiveArgs a;
    a.collective = comm::Collective::all_to_allv;
    a.send_counts = a.recv_counts = counts;
    a.send_displs = a.recv_displs = packed;
    std::string why;
    CHECK(native.supports(a, "native", &why));
    a.send_displs = gaps;
    CHECK_FALSE(native.supports(a, "native", &why));
    CHECK(why.find("packed") != std::string::npos);
    a.collective = comm::Collective::allreduce;
    a.memory = comm::MemoryKind::cuda;
    CHECK_FALSE(native.supports(a, "native", &why));
    CHECK(why.find("host memory") != std::string::npos);
  });
}

TEST_CASE("gloo native all-reduce: integer avg truncates, f16 and bf16 sum") {
  comm::test::run_local(3, gloo_config(), [](comm::Communicator& c) {
    const int n = c.size();
    for (const char* algo : {"native", "native_bcube"}) {
      comm::CallOptions opts;
      opts.algorithm = algo;
      // Rank r contributes r + 2i: the sum is 3 + 6i, the average 1 + 2i.
      std::vector<std::int32_t> v(11);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = c.rank() + 2 * static_cast<std::int32_t>(i);
      c.allreduce(comm::view(v), comm::ReduceOp::avg, opts);
      for (std::size_t i = 0; i < v.size(); ++i) CHECK(v[i] == (n * (n - 1) / 2 + 2 * n * static_cast<int>(i)) / n);
      // 16-bit floats: 1.5 from every rank sums exactly to 4.5 (f16 0x4480, bf16 0x4090).
      for (const auto& [type, one_and_half, sum] :
           {std::tuple{comm::DataType::f16, std::uint16_t{0x3E00}, std::uint16_t{0x4480}},
            std::tuple{comm::DataType::bf16, std::uint16_t{0x3FC0}, std::uint16_t{0x4090}}}) {
        std::vector<std::uint16_t> h(5, one_and_half);
        c.allreduce(comm::View{h.data(), h.size(), type}, comm::ReduceOp::sum, opts);
        for (auto x : h) CHECK(x == sum);
      }
    }
  });
}

TEST_CASE("gloo transport fails fast after a cancelled operation") {
  // Rank 1 stays until rank 0 has checked: its leaving would close the
  // connections and turn the expected "aborted" into "peer failed".
  std::atomic<bool> checked{false};
  comm::test::run_local(2, gloo_config(), [&checked](comm::Communicator& c) {
    comm::Transport& t = comm::detail::Access::impl(c).transport();
    if (c.rank() == 1) {
      while (!checked.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return;
    }
    {
      std::uint64_t never = 0;
      comm::Completion pending;
      t.irecv(1, 77, &never, sizeof never, pending);
      t.cancel(pending);
      CHECK(pending.state.load() == comm::Completion::failed);
      CHECK(pending.code == ErrorCode::aborted);
      comm::Completion later;
      t.isend(1, 78, &never, sizeof never, later);
      CHECK(later.state.load() == comm::Completion::failed);
      CHECK(later.code == ErrorCode::transport_failure);
      CHECK(later.message.find("create a new communicator") != std::string::npos);
      checked = true;
    }
  });
}

namespace {

// Drives `t` as the executor does (progress, then wait) until `c` is no longer pending or 10 s pass.
bool drive_until_done(comm::Transport& t, const comm::Completion& c) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (c.is_pending() && std::chrono::steady_clock::now() < deadline) {
    if (t.progress()) continue;
    t.wait(std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1)));
  }
  return !c.is_pending();
}

}  // namespace

TEST_CASE("gloo transport reports an operation that finishes while it sleeps on another") {
  // Rank 0 waits for two receives from rank 1. Rank 1 sends the second one
  // only after rank 0 has acknowledged the first, which it sends 20 ms late,
  // so rank 0's driving thread sleeps on the older receive while the newer
  // one finishes: that one must be reported (by the slice's end or a
  // completion thread), or neither rank gets further.
  comm::test::run_local(2, gloo_config(), [](comm::Communicator& c) {
    comm::Transport& t = comm::detail::Access::impl(c).transport();
    std::uint64_t first = 0, second = 0, ack = 0;
    if (c.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      first = 0x1111;
      comm::Completion sent_first, got_ack;
      t.isend(0, 2, &first, sizeof first, sent_first);
      t.irecv(0, 3, &ack, sizeof ack, got_ack);
      REQUIRE(drive_until_done(t, got_ack));
      CHECK(ack == 0xacc);
      second = 0x2222;
      comm::Completion sent_second;
      t.isend(0, 1, &second, sizeof second, sent_second);
      REQUIRE(drive_until_done(t, sent_second));
      REQUIRE(drive_until_done(t, sent_first));
      CHECK(sent_first.state.load() == comm::Completion::done);
      CHECK(sent_second.state.load() == comm::Completion::done);
      return;
    }
    comm::Completion got_second, got_first;
    t.irecv(1, 1, &second, sizeof second, got_second);  // the older: what the driving thread sleeps on
    t.irecv(1, 2, &first, sizeof first, got_first);
    REQUIRE(drive_until_done(t, got_first));
    CHECK(got_first.state.load() == comm::Completion::done);
    CHECK(first == 0x1111);
    CHECK(got_second.is_pending());  // rank 1 has not sent it: it waits for the acknowledgement
    ack = 0xacc;
    comm::Completion sent_ack;
    t.isend(1, 3, &ack, sizeof ack, sent_ack);
    REQUIRE(drive_until_done(t, got_second));
    CHECK(got_second.state.load() == comm::Completion::done);
    CHECK(second == 0x2222);
    REQUIRE(drive_until_done(t, sent_ack));
  });
}
