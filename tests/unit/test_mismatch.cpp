// Mismatched calls never exchange data: the call signature is part of every
// tag, and a stalled call is diagnosed into an error naming both calls —
// by default, without COMM_CHECK.

#include "local_group.hpp"

#include <comm/comm.hpp>
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

using comm::Collective;
using comm::DataType;
using comm::ReduceOp;
using Clock = std::chrono::steady_clock;

namespace {

struct Outcome {
  bool threw = false;
  comm::ErrorCode code = comm::ErrorCode::internal;
  std::string message;
  double seconds = 0;
};

// Runs body(rank, comm) on `n` thread ranks with a 20 s timeout: a mismatch
// must be named well before it (the stall diagnosis starts after 1 s).
std::vector<Outcome> run(int n, const std::function<void(comm::Communicator&)>& body) {
  std::vector<Outcome> out(static_cast<std::size_t>(n));
  std::mutex mu;
  comm::Config cfg;
  cfg.timeout = std::chrono::seconds(20);
  comm::test::run_local(n, cfg, [&](comm::Communicator& c) {
    Outcome o;
    const auto t0 = Clock::now();
    try {
      body(c);
    } catch (const comm::Error& e) {
      o.threw = true;
      o.code = e.code();
      o.message = e.what();
    }
    o.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::lock_guard lk(mu);
    out[static_cast<std::size_t>(c.rank())] = o;
  });
  return out;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void check_named_mismatch(const Outcome& o, const std::string& mine, const std::string& theirs) {
  INFO(o.message);
  CHECK(o.threw);
  CHECK(o.code == comm::ErrorCode::mismatch);
  CHECK(has(o.message, mine));
  CHECK(has(o.message, theirs));
  CHECK(o.seconds < 10);  // named by the diagnosis, not by the 20 s timeout
}

}  // namespace

TEST_CASE("mismatch: f32 on one rank and i32 on the other never mixes bytes, and names both calls") {
  std::vector<float> f(4, 2.0f);
  std::vector<std::int32_t> i(4, 2);
  const auto o = run(2, [&](comm::Communicator& c) {
    comm::CallOptions direct;
    direct.algorithm = "direct";
    if (c.rank() == 0)
      c.allreduce(comm::view(f), ReduceOp::sum, direct);
    else
      c.allreduce(comm::view(i), ReduceOp::sum, direct);
  });
  check_named_mismatch(o[0], "f32", "i32");
  check_named_mismatch(o[1], "i32", "f32");
  CHECK(f == std::vector<float>(4, 2.0f));  // untouched: no garbage like 1065353217
  CHECK(i == std::vector<std::int32_t>(4, 2));
}

TEST_CASE("mismatch: sum against max, and allreduce against broadcast, are named") {
  std::vector<float> a(8, 1.0f), b(8, 1.0f);
  auto o = run(2, [&](comm::Communicator& c) {
    if (c.rank() == 0)
      c.allreduce(comm::view(a), ReduceOp::sum);
    else
      c.allreduce(comm::view(b), ReduceOp::max);
  });
  check_named_mismatch(o[0], "sum", "max");
  check_named_mismatch(o[1], "max", "sum");

  std::vector<float> x(8, 3.0f), y(8, 4.0f);
  o = run(2, [&](comm::Communicator& c) {
    if (c.rank() == 0)
      c.allreduce(comm::view(x), ReduceOp::sum);
    else
      c.broadcast(comm::view(y), 0);
  });
  check_named_mismatch(o[1], "broadcast", "allreduce");
  CHECK(y == std::vector<float>(8, 4.0f));  // the broadcast's non-root never took allreduce data
}

TEST_CASE("mismatch: broadcast roots that differ never deliver the wrong root's data") {
  // Two ranks that each believe they are the root exchange nothing: both
  // complete, each keeping its own data (nothing crossed between the calls).
  std::vector<std::vector<float>> two{std::vector<float>(16, 10.0f), std::vector<float>(16, 11.0f)};
  auto o = run(2, [&](comm::Communicator& c) {
    c.broadcast(comm::view(two[static_cast<std::size_t>(c.rank())]), c.rank());
  });
  CHECK(two[0] == std::vector<float>(16, 10.0f));
  CHECK(two[1] == std::vector<float>(16, 11.0f));

  // Ranks 0 and 2 broadcast from 0, rank 1 from 1, scattering and gathering
  // among all ranks: no rank takes data of the other root's call, and the
  // ranks left waiting name the calls.
  std::vector<std::vector<float>> three{std::vector<float>(16, 10.0f), std::vector<float>(16, 11.0f),
                                        std::vector<float>(16, 12.0f)};
  comm::CallOptions scatter;
  scatter.algorithm = "scatter_allgather";
  o = run(3, [&](comm::Communicator& c) {
    c.broadcast(comm::view(three[static_cast<std::size_t>(c.rank())]), c.rank() == 1 ? 1 : 0, scatter);
  });
  int named = 0;
  for (int r = 0; r < 3; ++r) {
    const Outcome& x = o[static_cast<std::size_t>(r)];
    INFO("rank " << r << ": " << x.message);
    if (x.threw) {
      CHECK(x.code != comm::ErrorCode::timeout);
      named += x.code == comm::ErrorCode::mismatch && has(x.message, "root 1") && has(x.message, "root 0");
    }
    if (r != 1) CHECK(std::none_of(three[static_cast<std::size_t>(r)].begin(), three[static_cast<std::size_t>(r)].end(),
                                   [](float v) { return v == 11.0f; }));
  }
  CHECK(named >= 1);
}

TEST_CASE("mismatch: matching calls after many collectives still pair (sequence numbers wrap safely)") {
  const auto o = run(2, [&](comm::Communicator& c) {
    std::vector<float> v(3);
    for (int k = 0; k < 300; ++k) {
      std::fill(v.begin(), v.end(), static_cast<float>(c.rank() + k));
      c.allreduce(comm::view(v), ReduceOp::sum);
      if (v[0] != static_cast<float>(2 * k + 1)) throw comm::Error(comm::ErrorCode::internal, "wrong sum");
    }
  });
  INFO(o[0].message);
  INFO(o[1].message);
  CHECK_FALSE(o[0].threw);
  CHECK_FALSE(o[1].threw);
}
