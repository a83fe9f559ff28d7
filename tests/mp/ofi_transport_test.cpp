// The `ofi` transport's point-to-point contract, with ranks as threads of this
// process (each with its own libfabric fabric, domain and endpoint), over
// tcp;ofi_rxm on loopback: data and matching order, truncation, cancel,
// interrupt, links, and the errors for a provider that does not exist and for
// shm, which refuses ranks that are threads of one process (it crashes there;
// transports/ofi/ofi_shm.cpp). shm's data path is tested across processes
// (tests/mp/ofi.cmake).

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <comm/comm.hpp>

#include "../thread_ranks.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <sys/mman.h>
#include <time.h>
#include <vector>

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kProviders[] = {"tcp;ofi_rxm"};

using Group = std::vector<std::unique_ptr<comm::Transport>>;

using comm::test::on_threads;

Group make_group(int n, const std::string& provider) {
  auto store = comm::make_memory_store();
  comm::Config cfg;
  cfg.transport_options["ofi.provider"] = provider;
  cfg.timeout = 20s;
  Group g(static_cast<std::size_t>(n));
  on_threads(n, [&](int r) {
    comm::TransportInit init;
    init.rank = r;
    init.size = n;
    init.store = store;
    init.config = &cfg;
    g[static_cast<std::size_t>(r)] = comm::create_transport("ofi", init);
  });
  return g;
}

// Drives `t` until every completion left pending, or throws after `limit`.
void drive(comm::Transport& t, std::vector<comm::Completion*> cs, std::chrono::milliseconds limit = 10'000ms) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    bool pending = false;
    for (auto* c : cs) pending = pending || c->is_pending();
    if (!pending) return;
    if (Clock::now() > deadline) throw std::runtime_error("operations still pending after the time limit");
    if (!t.progress()) t.wait(std::min(deadline, Clock::now() + 10ms));
  }
}

std::uint8_t pattern(std::size_t i, int salt) { return static_cast<std::uint8_t>((i * 131 + static_cast<std::size_t>(salt) * 7) & 0xff); }

}  // namespace

TEST_CASE("ofi: messages of many sizes arrive intact and match in posting order") {
  for (const std::string prov : kProviders) {
    CAPTURE(prov);
    Group g = make_group(2, prov);
    const std::size_t sizes[] = {0, 1, 4097, std::size_t{1} << 20, std::size_t{8} << 20};
    on_threads(2, [&](int r) {
      comm::Transport& t = *g[static_cast<std::size_t>(r)];
      const int peer = 1 - r;
      for (std::size_t n : sizes) {
        // Two messages on one tag, then one on another tag posted first by the receiver.
        std::vector<std::uint8_t> a(n), b(n), c(n), ra(n, 0), rb(n, 0), rc(n, 0);
        for (std::size_t i = 0; i < n; ++i) {
          a[i] = pattern(i, r * 3 + 1);
          b[i] = pattern(i, r * 3 + 2);
          c[i] = pattern(i, r * 3 + 3);
        }
        comm::Completion sa, sb, sc, qa, qb, qc;
        t.irecv(peer, 77, rc.data(), n, qc);
        t.irecv(peer, 5, ra.data(), n, qa);
        t.irecv(peer, 5, rb.data(), n, qb);
        t.isend(peer, 5, a.data(), n, sa);
        t.isend(peer, 5, b.data(), n, sb);
        t.isend(peer, 77, c.data(), n, sc);
        drive(t, {&sa, &sb, &sc, &qa, &qb, &qc});
        for (auto* q : {&sa, &sb, &sc, &qa, &qb, &qc}) REQUIRE(q->state.load() == comm::Completion::done);
        CHECK(qa.bytes == n);
        CHECK(qb.bytes == n);
        CHECK(qc.bytes == n);
        CHECK(sa.bytes == n);
        bool ok = true;
        for (std::size_t i = 0; i < n && ok; ++i)
          ok = ra[i] == pattern(i, peer * 3 + 1) && rb[i] == pattern(i, peer * 3 + 2) && rc[i] == pattern(i, peer * 3 + 3);
        CHECK_MESSAGE(ok, "payload of " << n << " B differs from what rank " << peer << " sent");
      }
    });
  }
}

TEST_CASE("ofi: a message longer than the receive buffer fails with mismatch naming the sizes") {
  for (const std::string prov : kProviders) {
    CAPTURE(prov);
    Group g = make_group(2, prov);
    std::string message;
    comm::ErrorCode code = comm::ErrorCode::internal;
    on_threads(2, [&](int r) {
      comm::Transport& t = *g[static_cast<std::size_t>(r)];
      std::vector<char> buf(100, 'x');
      comm::Completion c;
      if (r == 0) {
        t.isend(1, 9, buf.data(), 100, c);
        drive(t, {&c});
      } else {
        t.irecv(0, 9, buf.data(), 64, c);
        drive(t, {&c});
        REQUIRE(c.state.load() == comm::Completion::failed);
        code = c.code;
        message = c.message;
      }
    });
    CHECK(code == comm::ErrorCode::mismatch);
    // libfabric 1.17 does not report the sender's size (len = olen = 0).
    CHECK_MESSAGE(message.find("64 B") != std::string::npos, message);
    CHECK_MESSAGE(message.find("truncated") != std::string::npos, message);
    CHECK_MESSAGE(message.find("rank 0") != std::string::npos, message);
  }
}

TEST_CASE("ofi: a cancelled receive is withdrawn and the tag stays usable") {
  for (const std::string prov : kProviders) {
    CAPTURE(prov);
    Group g = make_group(2, prov);
    on_threads(2, [&](int r) {
      comm::Transport& t = *g[static_cast<std::size_t>(r)];
      if (r == 1) {
        int dropped = 0, got = 0;
        comm::Completion c;
        t.irecv(0, 3, &dropped, sizeof dropped, c);
        t.cancel(c);
        CHECK(c.state.load() == comm::Completion::failed);
        CHECK(c.code == comm::ErrorCode::aborted);
        comm::Completion go, d;
        const int token = 1;
        t.isend(0, 4, &token, sizeof token, go);  // tell rank 0 to send only now
        t.irecv(0, 3, &got, sizeof got, d);
        drive(t, {&go, &d});
        CHECK(d.state.load() == comm::Completion::done);
        CHECK(got == 4242);
        CHECK(dropped == 0);
      } else {
        int token = 0;
        const int value = 4242;
        comm::Completion go, s;
        t.irecv(1, 4, &token, sizeof token, go);
        drive(t, {&go});
        t.isend(1, 3, &value, sizeof value, s);
        drive(t, {&s});
        CHECK(token == 1);
      }
    });
  }
}

TEST_CASE("ofi: a send the provider cannot withdraw never reads its buffer after it is reported failed") {
  // rxm cannot take back a rendezvous send: cancel() has to report it failed
  // while the provider still holds it. The caller may then free the buffer
  // (a failed collective frees its scratch), so nothing may read it
  // afterwards, even when the receiver asks for the data only then. The
  // buffer is unmapped here, so a late read is a crash, not a silent one.
  for (const std::string prov : kProviders) {
    CAPTURE(prov);
    Group g = make_group(2, prov);
    constexpr std::size_t bytes = 16u << 20;  // far above rxm's rendezvous threshold
    std::atomic<bool> unmapped{false};
    on_threads(2, [&](int r) {
      comm::Transport& t = *g[static_cast<std::size_t>(r)];
      int hello = r, heard = -1;  // connects the pair, so the big send is accepted at once
      comm::Completion hs, hr;
      t.irecv(1 - r, 6, &heard, sizeof heard, hr);
      t.isend(1 - r, 6, &hello, sizeof hello, hs);
      drive(t, {&hs, &hr});
      REQUIRE(heard == 1 - r);
      if (r == 0) {
        void* buf = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(buf != MAP_FAILED);
        std::memset(buf, 0x5a, bytes);
        comm::Completion s;
        t.isend(1, 7, buf, bytes, s);
        for (int i = 0; i < 100; ++i) t.progress();  // the request to send reaches rank 1
        t.cancel(s);
        CHECK(s.state.load() == comm::Completion::failed);
        CHECK(s.code == comm::ErrorCode::aborted);
        CHECK_MESSAGE(s.message.find("closed its endpoint") != std::string::npos, s.message);
        ::munmap(buf, bytes);
        unmapped = true;
        // Keep driving the transport while rank 1 asks for the data.
        const auto until = Clock::now() + 1500ms;
        while (Clock::now() < until)
          if (!t.progress()) t.wait(std::min(until, Clock::now() + 10ms));
        // Nothing can be posted on a closed endpoint: a later send fails at once, saying why.
        comm::Completion later;
        t.isend(1, 8, &hello, sizeof hello, later);
        CHECK(later.state.load() == comm::Completion::failed);
        CHECK(later.code == comm::ErrorCode::transport_failure);
        CHECK_MESSAGE(later.message.find("endpoint was closed") != std::string::npos, later.message);
      } else {
        while (!unmapped) std::this_thread::sleep_for(1ms);
        std::vector<std::uint8_t> in(bytes);
        comm::Completion c;
        t.irecv(0, 7, in.data(), bytes, c);
        const auto until = Clock::now() + 1500ms;
        while (c.is_pending() && Clock::now() < until)
          if (!t.progress()) t.wait(std::min(until, Clock::now() + 10ms));
        // The data left with the sender's endpoint: whatever lay at that
        // address afterwards must not arrive here as if it had been sent.
        CHECK_MESSAGE(c.state.load() != comm::Completion::done, "received " << int(in[bytes / 2]));
        if (c.is_pending()) t.cancel(c);
      }
    });
  }
}

TEST_CASE("ofi: interrupt() wakes a waiting thread long before its deadline") {
  for (const std::string prov : kProviders) {
    CAPTURE(prov);
    Group g = make_group(1, prov);
    comm::Transport& t = *g[0];
    std::atomic<bool> fired{false};
    Clock::time_point fired_at{};
    std::thread waker([&] {
      std::this_thread::sleep_for(100ms);
      fired_at = Clock::now();
      fired.store(true);
      t.interrupt();
    });
    const auto start = Clock::now();
    // wait() may return early; it must return soon after the interrupt (which
    // is sticky if it lands between two waits).
    do {
      t.wait(start + 10s);
    } while (!fired.load());
    const auto took = Clock::now() - fired_at;
    waker.join();
    CHECK(took < 200ms);
    CHECK(Clock::now() - start < 5s);
  }
}

TEST_CASE("ofi: a slow peer is not declared dead, and waiting for it does not burn a core") {
  for (const std::string prov : kProviders) {
    CAPTURE(prov);
    Group g = make_group(2, prov);
    double cpu_s = 0, wall_s = 0;
    on_threads(2, [&](int r) {
      comm::Transport& t = *g[static_cast<std::size_t>(r)];
      int value = 0;
      comm::Completion c;
      if (r == 1) {
        // Longer than the liveness interval and the probe refusal limit together.
        std::this_thread::sleep_for(3500ms);
        value = 99;
        t.isend(0, 1, &value, sizeof value, c);
        drive(t, {&c});
        return;
      }
      timespec cpu0{}, cpu1{};
      ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
      const auto start = Clock::now();
      t.irecv(1, 1, &value, sizeof value, c);
      drive(t, {&c});
      wall_s = std::chrono::duration<double>(Clock::now() - start).count();
      ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
      cpu_s = static_cast<double>(cpu1.tv_sec - cpu0.tv_sec) + static_cast<double>(cpu1.tv_nsec - cpu0.tv_nsec) / 1e9;
      CHECK_MESSAGE(c.state.load() == comm::Completion::done, c.message);
      CHECK(value == 99);
    });
    MESSAGE(prov << ": waited " << wall_s << " s using " << cpu_s << " s of CPU");
    CHECK(wall_s > 3.0);
    // Sleeping on the CQ fd (tcp) costs next to nothing; shm's back-off polls
    // at most every 50 us, each poll a few microseconds.
    CHECK(cpu_s < (g[0]->caps().can_block ? 0.2 : 0.6) * wall_s);
  }
}

TEST_CASE("ofi: links, capabilities and argument checks") {
  Group tcp = make_group(2, "tcp;ofi_rxm");
  CHECK(tcp[0]->link(1).kind == comm::LinkKind::tcp);
  CHECK(tcp[0]->link(0).kind == comm::LinkKind::self);
  CHECK(tcp[0]->link(1).detail.find("tcp;ofi_rxm") != std::string::npos);
  CHECK(tcp[0]->caps().can_block);
  CHECK(tcp[0]->caps().peer_failure_detection);
  CHECK_FALSE(tcp[0]->caps().cuda_memory);
  comm::Completion c;
  char byte = 0;
  CHECK_THROWS_AS(tcp[0]->isend(2, 0, &byte, 1, c), comm::Error);
  CHECK_THROWS_AS(tcp[0]->irecv(1, std::uint64_t{1} << comm::kTagBits, &byte, 1, c), comm::Error);
}

TEST_CASE("ofi: the automatic choice on one host is tcp;ofi_rxm, never shm") {
  Group g = make_group(2, "");
  CHECK_MESSAGE(g[0]->link(1).detail.find("tcp;ofi_rxm") != std::string::npos, g[0]->link(1).detail);
}

// Creating a group over `provider` must fail with invalid_config whose
// message contains every one of `texts`.
static void expect_config_error(const std::string& provider, const std::vector<std::string>& texts) {
  try {
    make_group(2, provider);
    FAIL("creating the transport succeeded");
  } catch (const comm::Error& e) {
    const std::string what = e.what();
    CHECK(e.code() == comm::ErrorCode::invalid_config);
    for (const auto& t : texts) CHECK_MESSAGE(what.find(t) != std::string::npos, what);
  }
}

TEST_CASE("ofi: shm with ranks that are threads of one process is refused, naming them") {
  expect_config_error("shm", {"ranks 0 and 1 are both in process", "tcp;ofi_rxm"});
}

TEST_CASE("ofi: an unknown provider is a configuration error listing the usable ones") {
  expect_config_error("no-such-provider", {"no-such-provider", "tcp;ofi_rxm", "shm"});
}

int main(int argc, char** argv) {
  // Before libfabric reads its environment (on the first fi_getinfo).
  ::setenv("FI_TCP_IFACE", "lo", 1);
  ::unsetenv("FI_PROVIDER");
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
