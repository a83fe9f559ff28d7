// The Communicator over the local transport: results, options, selection
// overrides, usage errors before anything is sent, split, non-blocking
// operations, abort and timeouts.

#include "local_group.hpp"

#include <comm/comm.hpp>
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

using namespace comm;
using comm::test::run_local;
using namespace std::chrono_literals;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

template <class F>
Error expect_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("expected comm::Error");
  return Error(ErrorCode::internal, "unreachable");
}

}  // namespace

TEST_CASE("a world of one needs no store") {
  Communicator c = Communicator::create(Config{});
  std::vector<float> v{1, 2, 3};
  c.allreduce(view(v), ReduceOp::sum);
  CHECK(v == std::vector<float>{1, 2, 3});
  c.barrier();
}

TEST_CASE("allreduce sums across 4 ranks, in place and out of place") {
  run_local(4, [](Communicator& c) {
    const std::size_t n = 1001;
    std::vector<std::int32_t> in(n), out(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::int32_t>(i) * (c.rank() + 1);
    c.allreduce(view(in), view(out), ReduceOp::sum);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(out[i] == static_cast<std::int32_t>(i) * 10);
    c.allreduce(view(in), ReduceOp::max);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(in[i] == static_cast<std::int32_t>(i) * 4);
  });
}

TEST_CASE("every allreduce algorithm can be forced per call and through COMM_ALGO") {
  std::vector<std::string> names;
  run_local(1, [&](Communicator& c) { names = c.algorithms(Collective::allreduce); });
  REQUIRE(names.size() >= 4);
  for (const auto& name : names) {
    CAPTURE(name);
    run_local(3, [&](Communicator& c) {
      std::vector<double> v(77);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.5 * static_cast<double>(i) + c.rank();
      CallOptions o;
      o.algorithm = name;
      Work w = c.iallreduce(view(v), view(v), ReduceOp::sum, o);
      CHECK(w.algorithm() == name);
      w.wait();
      for (std::size_t i = 0; i < v.size(); ++i) REQUIRE(v[i] == 1.5 * static_cast<double>(i) + 3.0);
    });
    Config cfg;
    cfg.algo_override = "allreduce=" + name;
    run_local(3, cfg, [&](Communicator& c) {
      CHECK(c.algorithm_for(Collective::allreduce, 8) == name);
      CHECK(c.algorithm_for(Collective::allreduce, std::size_t{1} << 26) == name);
      std::vector<float> v(5, 1.0f);
      Work w = c.iallreduce(view(v), view(v), ReduceOp::sum);
      CHECK(w.algorithm() == name);
      w.wait();
      CHECK(v == std::vector<float>(5, 3.0f));
    });
  }
}

TEST_CASE("override ranges pick by size; a bad override fails creation clearly") {
  Config cfg;
  cfg.algo_override = "allreduce=direct:0-64K,ring:64K-";
  run_local(2, cfg, [](Communicator& c) {
    CHECK(c.algorithm_for(Collective::allreduce, 1024) == "direct");
    CHECK(c.algorithm_for(Collective::allreduce, 64 * 1024) == "ring");
    auto table = c.selection_table(Collective::allreduce, 1 << 20);
    REQUIRE(table.size() == 2);
    CHECK(table[0].algorithm == "direct");
    CHECK(table[0].source == "override");
    CHECK(table[1].min_bytes == 64 * 1024);
  });
  cfg.algo_override = "allreduce=nosuch";
  Error e = expect_error([&] { run_local(2, cfg, [](Communicator&) {}); });
  CHECK(e.code() == ErrorCode::invalid_config);
  CHECK(contains(e.what(), "nosuch"));
  CHECK(contains(e.what(), "ring"));  // lists valid names
}

TEST_CASE("usage errors come before anything is sent and leave the communicator usable") {
  run_local(2, [](Communicator& c) {
    std::vector<float> a(8, 1.0f), b(4);
    Error e = expect_error([&] { c.allreduce(view(a), view(b), ReduceOp::sum); });
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(contains(e.what(), "8 elements but output has 4"));
    e = expect_error([&] { c.allreduce(ConstView{nullptr, 4, DataType::f32}, view(b), ReduceOp::sum); });
    CHECK(contains(e.what(), "null"));
    e = expect_error([&] { c.broadcast(view(a), 2); });
    CHECK(contains(e.what(), "root 2 is outside [0, 2)"));
    e = expect_error([&] { c.send(view(a), -1); });
    CHECK(contains(e.what(), "peer -1"));
    CallOptions o;
    o.algorithm = "warp_drive";
    e = expect_error([&] { c.allreduce(view(a), ReduceOp::sum, o); });
    CHECK(e.code() == ErrorCode::unknown_algorithm);
    CHECK(contains(e.what(), "warp_drive"));
    e = expect_error([&] { c.allreduce(View{a.data(), 8, DataType::f32, MemoryKind::cuda}, ReduceOp::sum); });
    CHECK(e.code() == ErrorCode::unsupported);
    CHECK(contains(e.what(), "CUDA device buffer"));
    std::vector<float> gathered(7);
    e = expect_error([&] { c.allgather(view(b), view(gathered)); });
    CHECK(contains(e.what(), "2 x 4"));
    CHECK_FALSE(c.failed());
    c.allreduce(view(a), ReduceOp::sum);  // still works, and the ranks still agree on sequence numbers
    CHECK(a == std::vector<float>(8, 2.0f));
  });
}

TEST_CASE("unknown transport lists the available ones") {
  Config cfg;
  cfg.transport = "carrier_pigeon";
  Error e = expect_error([&] { Communicator::create(cfg); });
  CHECK(e.code() == ErrorCode::unknown_transport);
  CHECK(contains(e.what(), "Config::transport='carrier_pigeon'"));
  CHECK(contains(e.what(), "local"));
}

TEST_CASE("a transport name that is not plain never reaches the plugin loader") {
  for (const char* name : {"../../etc/x", "/tmp/libcomm_x", "Local", "a.b"}) {
    INFO(name);
    Config cfg;
    cfg.transport = name;
    Error e = expect_error([&] { Communicator::create(cfg); });
    CHECK(e.code() == ErrorCode::unknown_transport);
    CHECK(contains(e.what(), "Config::transport='" + std::string(name) + "'"));
    CHECK(contains(e.what(), "is not valid: expected a transport name"));
    CHECK(contains(e.what(), "(available: "));
    CHECK_FALSE(contains(e.what(), "libcomm_" + std::string(name)));  // no dlopen was tried
    CHECK_FALSE(transport_unavailable_reason(name).empty());
  }
  Error e = expect_error([] { register_transport("bad/name", nullptr); });
  CHECK(e.code() == ErrorCode::invalid_argument);
  CHECK(contains(e.what(), "bad/name"));
}

TEST_CASE("send/recv match on peer and tag; a size mismatch names both sizes") {
  run_local(3, [](Communicator& c) {
    const int next = (c.rank() + 1) % c.size(), prev = (c.rank() + 2) % c.size();
    std::vector<std::int64_t> out{c.rank(), 100 + c.rank()}, in(2);
    CallOptions t7, t9;
    t7.tag = 7;
    t9.tag = 9;
    // Post tag 9 before tag 7 on both sides: matching is by tag, not order.
    Work r9 = c.irecv(View{in.data() + 1, 1, DataType::i64}, prev, t9);
    Work r7 = c.irecv(View{in.data(), 1, DataType::i64}, prev, t7);
    c.send(ConstView{out.data(), 1, DataType::i64}, next, t7);
    c.send(ConstView{out.data() + 1, 1, DataType::i64}, next, t9);
    r7.wait();
    r9.wait();
    CHECK(in[0] == prev);
    CHECK(in[1] == 100 + prev);
  });
  Error e = expect_error([] {
    run_local(2, [](Communicator& c) {
      std::vector<float> v(c.rank() == 0 ? 16 : 8);
      if (c.rank() == 0)
        c.send(view(v), 1);
      else
        c.recv(view(v), 0);
    });
  });
  CHECK(contains(e.what(), "64 B"));
  CHECK(contains(e.what(), "32 B"));
}

TEST_CASE("split into even and odd ranks") {
  run_local(5, [](Communicator& c) {
    Communicator sub = c.split(c.rank() % 2, -c.rank());  // key reverses the order
    REQUIRE(sub.valid());
    const int expected_size = c.rank() % 2 == 0 ? 3 : 2;
    CHECK(sub.size() == expected_size);
    std::vector<std::int32_t> v{c.rank()};
    sub.allreduce(view(v), ReduceOp::sum);
    CHECK(v[0] == (c.rank() % 2 == 0 ? 0 + 2 + 4 : 1 + 3));
    std::vector<std::int32_t> who{c.rank()}, all(static_cast<std::size_t>(sub.size()));
    sub.allgather(view(who), view(all));
    // Descending keys: the highest old rank is sub-rank 0.
    CHECK(all.front() > all.back());
    Communicator none = c.split(c.rank() == 0 ? -1 : 0, 0);
    CHECK(none.valid() == (c.rank() != 0));
  });
}

TEST_CASE("non-blocking operations complete in any wait order") {
  run_local(4, [](Communicator& c) {
    std::vector<float> a(1000, 1.0f), b(3000, 2.0f);
    Work wa = c.iallreduce(view(a), view(a), ReduceOp::sum);
    Work wb = c.iallreduce(view(b), view(b), ReduceOp::sum);
    wb.wait();
    wa.wait();
    CHECK(a == std::vector<float>(1000, 4.0f));
    CHECK(b == std::vector<float>(3000, 8.0f));
    Work wc = c.ibarrier();
    while (!wc.test()) std::this_thread::yield();
  });
}

TEST_CASE("a rank that never calls makes the others time out, naming it; later calls fail fast") {
  Config cfg;
  cfg.timeout = 300ms;
  std::atomic<bool> rank0_done{false};
  Error e = expect_error([&] {
    run_local(2, cfg, [&](Communicator& c) {
      if (c.rank() == 1) {
        while (!rank0_done) std::this_thread::sleep_for(1ms);
        return;
      }
      std::vector<float> v(16, 1.0f);
      const auto t0 = std::chrono::steady_clock::now();
      Error err = expect_error([&] { c.allreduce(view(v), ReduceOp::sum); });
      const auto waited = std::chrono::steady_clock::now() - t0;
      CHECK(err.code() == ErrorCode::timeout);
      CHECK(contains(err.what(), "allreduce #0"));
      CHECK(contains(err.what(), "waiting on rank(s) 1"));
      CHECK(waited >= 300ms);
      CHECK(waited < 3s);
      CHECK(c.failed());
      Error again = expect_error([&] { c.barrier(); });
      CHECK(again.code() == ErrorCode::communicator_failed);
      CHECK(contains(again.what(), "timed out"));
      const std::string fr = c.flight_recorder_json();
      CHECK(contains(fr, "\"state\":\"failed\""));
      rank0_done = true;
      throw Error(ErrorCode::internal, "rank 0 finished its checks");
    });
  });
  CHECK(contains(e.what(), "rank 0 finished its checks"));
}

TEST_CASE("abort from another thread unblocks a waiting receive quickly") {
  run_local(2, [](Communicator& c) {
    if (c.rank() == 1) return;  // never sends
    std::vector<float> v(4);
    std::thread killer([&] {
      std::this_thread::sleep_for(100ms);
      c.abort();
    });
    const auto t0 = std::chrono::steady_clock::now();
    Error e = expect_error([&] { c.recv(view(v), 1); });
    const auto after_abort = std::chrono::steady_clock::now() - t0 - 100ms;
    killer.join();
    CHECK(e.code() == ErrorCode::aborted);
    CHECK(contains(e.what(), "abort"));
    CHECK(after_abort < 100ms);
    CHECK(c.failed());
  });
}

TEST_CASE("abort with nothing pending: failed() says so at once and the next call is refused") {
  run_local(1, [](Communicator& c) {
    CHECK_FALSE(c.failed());
    c.abort();
    CHECK(c.failed());
    std::vector<float> v(4, 1.0f);
    Error e = expect_error([&] { c.allreduce(view(v), ReduceOp::sum); });
    CHECK(e.code() == ErrorCode::communicator_failed);
    CHECK(contains(e.what(), "aborted"));
  });
}

TEST_CASE("iall_to_allv: the count arrays are read during the call only; the Work completes later") {
  // Rank i sends (i + j + 1) elements of value 100*i + j to rank j.
  run_local(3, [](Communicator& c) {
    const std::size_t n = 3, me = static_cast<std::size_t>(c.rank());
    std::vector<std::int32_t> in, out;
    Work w;
    {
      std::vector<std::size_t> sc(n), sd(n), rc(n), rd(n);
      std::size_t at = 0;
      for (std::size_t j = 0; j < n; ++j) {
        sc[j] = me + j + 1;
        sd[j] = at;
        at += sc[j];
        for (std::size_t k = 0; k < sc[j]; ++k) in.push_back(static_cast<std::int32_t>(100 * me + j));
      }
      at = 0;
      for (std::size_t i = 0; i < n; ++i) {
        rc[i] = i + me + 1;
        rd[i] = at;
        at += rc[i];
      }
      out.assign(at, -1);
      w = c.iall_to_allv(view(in), sc, sd, view(out), rc, rd);
      std::fill(sc.begin(), sc.end(), 0);  // scribbled over and gone before the wait
      std::fill(rd.begin(), rd.end(), 999);
    }
    w.wait();
    std::size_t at = 0;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < i + me + 1; ++k, ++at) CHECK(out[at] == static_cast<std::int32_t>(100 * i + me));
    CHECK(at == out.size());
  });
}
