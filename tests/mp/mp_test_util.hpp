#pragma once
// Helpers shared by the multi-process test programs of tests/mp: how a program
// skips (exit 77, which comm_mp_test reports as a ctest skip) or fails (exit 1
// at once, saying which rank and why), and, for the programs that drive a
// transport directly, the completion, pattern and progress helpers their
// point-to-point checks are written with. Header-only: each program is one
// translation unit.

#include <comm/comm.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

// Fails the process (mptest::fail) with the condition's text and `msg` unless `cond` holds.
#define COMM_MP_CHECK(cond, msg)                                          \
  do {                                                                    \
    if (!(cond)) ::mptest::fail(std::string(#cond " -- ") + (msg));       \
  } while (0)

namespace mptest {

using Clock = std::chrono::steady_clock;

// This process's rank, for failure messages; -1 until the program knows it.
inline int g_rank = -1;

// Prints "rank R: FAIL: <what>" on stderr and ends the process with exit status 1 at once.
[[noreturn]] inline void fail(const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "rank %d: FAIL: %s\n", g_rank, what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

// Ends the process with 77 (a ctest skip), saying why, unless transport `name` is built into this library.
inline void require_transport(std::string_view name) {
  const std::vector<std::string> available = comm::available_transports();
  if (std::find(available.begin(), available.end(), name) != available.end()) return;
  std::printf("SKIPPED: %s\n", comm::transport_unavailable_reason(name).c_str());
  std::exit(77);
}

// Ends the process with 77 (a ctest skip), saying why, if `e` says that cfg's transport is not in this build.
inline void exit_if_not_built(const comm::Config& cfg, const comm::Error& e) {
  if (e.code() != comm::ErrorCode::unknown_transport) return;
  std::printf("SKIPPED: transport '%s' is not available in this build: %s\n", cfg.transport.c_str(), e.what());
  std::exit(77);
}

// The communicator of `cfg`. If it cannot be created the process ends: 77 (a
// skip) when the transport is not built, else 1 with the error.
inline comm::Communicator create_or_exit(const comm::Config& cfg) {
  try {
    return comm::Communicator::create(cfg);
  } catch (const comm::Error& e) {
    exit_if_not_built(cfg, e);
    std::printf("FAIL: cannot create the communicator: %s\n", e.what());
    std::exit(1);
  }
}

// Seconds from `t0` to now.
inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Calls fn, which must throw comm::Error, and hands the error and the seconds
// fn took to on_error; fails the test with `if_returned` when fn returns.
template <class Fn, class OnError>
void expect_error(Fn&& fn, const char* if_returned, OnError&& on_error) {
  const auto t0 = Clock::now();
  try {
    fn();
  } catch (const comm::Error& e) {
    on_error(e, seconds_since(t0));
    return;
  }
  fail(if_returned);
}

// The waiting side of a timeout test (rank 0, whose peer never joins): an
// all-reduce with `algorithm` must fail with ErrorCode::timeout at `timeout`
// (no sooner than 0.9 of it, at most 2.5 s later), leave the communicator
// failed, and the next call must fail with communicator_failed within 0.1 s.
// Returns the timeout's message, for checks of what it names.
inline std::string expect_timeout_then_fail_fast(comm::Communicator& c, const std::string& algorithm,
                                                 std::chrono::milliseconds timeout) {
  const double timeout_s = std::chrono::duration<double>(timeout).count();
  std::vector<float> data(4096, 1.0f);
  comm::CallOptions opts;
  opts.algorithm = algorithm;
  const auto allreduce = [&] { c.allreduce(comm::view(data), comm::ReduceOp::sum, opts); };
  std::string message;
  expect_error(allreduce, "allreduce completed although rank 1 never called it", [&](const comm::Error& e, double took) {
    message = e.what();
    std::printf("rank %d: %s allreduce failed after %.2f s (timeout %.2f s): %s: %s\n", c.rank(), algorithm.c_str(),
                took, timeout_s, std::string(comm::to_string(e.code())).c_str(), e.what());
    if (e.code() != comm::ErrorCode::timeout) fail("expected ErrorCode::timeout");
    if (took < timeout_s * 0.9 || took > timeout_s + 2.5) fail("the timeout did not fire at the configured time");
  });
  if (!c.failed()) fail("the communicator is not failed after a timeout");
  expect_error(allreduce, "a call on a failed communicator succeeded", [&](const comm::Error& e, double took) {
    std::printf("rank %d: next call failed after %.4f s: %s: %s\n", c.rank(), took,
                std::string(comm::to_string(e.code())).c_str(), e.what());
    if (e.code() != comm::ErrorCode::communicator_failed) fail("expected ErrorCode::communicator_failed");
    if (took > 0.1) fail("the next call did not fail fast");
  });
  return message;
}

// --- transports driven directly (no communicator) ---------------------------

// The TransportInit of this rank of `cfg` (which must outlive the transport), over `store`.
inline comm::TransportInit transport_init(const comm::Config& cfg, std::shared_ptr<comm::Store> store) {
  comm::TransportInit init;
  init.rank = cfg.rank;
  init.size = cfg.world_size;
  init.store = std::move(store);
  init.config = &cfg;
  return init;
}

// A completion as text, for failure messages.
inline std::string state(const comm::Completion& c) {
  switch (c.state.load()) {
    case comm::Completion::pending: return "pending";
    case comm::Completion::done: return "done (" + std::to_string(c.bytes) + " B)";
    default: return "failed: " + std::string(comm::to_string(c.code)) + ": " + c.message;
  }
}

// Byte i of the message `from` sends to `to`: differs per pair, and repeats only every few KiB.
inline unsigned char pattern(int from, int to, std::size_t i) {
  return static_cast<unsigned char>(from * 31 + to * 7 + i * 13 + (i >> 9));
}

// Bytes past the end of a receive buffer, filled with kGuard, that a receive must not touch.
constexpr std::size_t kGuardBytes = 16;
constexpr unsigned char kGuard = 0xEE;

// Fails unless `in` holds `bytes` of pattern(from, to, .) followed by kGuardBytes untouched guard bytes.
inline void expect_pattern(const std::vector<unsigned char>& in, std::size_t bytes, int from, int to,
                           const std::string& what) {
  for (std::size_t i = 0; i < bytes; ++i)
    if (in[i] != pattern(from, to, i)) fail("byte " + std::to_string(i) + " of " + what + " is wrong");
  for (std::size_t i = bytes; i < bytes + kGuardBytes; ++i)
    if (in[i] != kGuard) fail("the receive of " + what + " wrote past its end");
}

// Progresses `t` until no completion of `cs` (pointers) is pending: true, or
// false if some still are after `limit`. Between polls that found nothing it
// blocks in t.wait() (at most 100 ms at a time) unless `spin`.
template <class Completions>
bool drive_for(comm::Transport& t, const Completions& cs, std::chrono::milliseconds limit, bool spin = false) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    bool pending = false;
    for (const comm::Completion* c : cs) pending = pending || c->is_pending();
    if (!pending) return true;
    if (t.progress()) continue;
    if (Clock::now() >= deadline) return false;
    if (!spin) t.wait(std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
  }
}

// Fails (naming `what`) unless every completion of `cs` finishes within `limit`.
template <class Completions>
void drive_or_fail(comm::Transport& t, const Completions& cs, const std::string& what,
                   std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  if (!drive_for(t, cs, limit)) fail(what + ": still pending after " + std::to_string(limit.count()) + " ms");
}

// Sixteen messages of one tag from every rank to the next, all receives
// posted first: each must arrive from the previous rank in posting order.
// Then a message with the highest tag (kTagBits bits) must arrive intact.
inline void expect_tag_order(comm::Transport& t, std::uint64_t tag) {
  const int me = t.rank(), n = t.size();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  constexpr int kMsgs = 16;
  std::uint64_t out[kMsgs], in[kMsgs];
  comm::Completion sc[kMsgs], rc[kMsgs];
  for (int i = 0; i < kMsgs; ++i) {
    out[i] = static_cast<std::uint64_t>(me) * 1000 + i;
    t.irecv(prev, tag, &in[i], sizeof in[i], rc[i]);
  }
  for (int i = 0; i < kMsgs; ++i) t.isend(next, tag, &out[i], sizeof out[i], sc[i]);
  for (int i = 0; i < kMsgs; ++i) {
    drive_or_fail(t, std::vector{&sc[i], &rc[i]}, "message " + std::to_string(i) + " of tag " + std::to_string(tag));
    COMM_MP_CHECK(rc[i].state == comm::Completion::done, state(rc[i]));
    COMM_MP_CHECK(in[i] == static_cast<std::uint64_t>(prev) * 1000 + i,
                  "message " + std::to_string(i) + " of tag " + std::to_string(tag) + " out of order: " +
                      std::to_string(in[i]));
  }
  const std::uint64_t top_tag = (std::uint64_t{1} << comm::kTagBits) - 1;
  std::uint64_t a = 0xA, b = 0;
  comm::Completion s1, r1;
  t.irecv(prev, top_tag, &b, sizeof b, r1);
  t.isend(next, top_tag, &a, sizeof a, s1);
  drive_or_fail(t, std::vector{&s1, &r1}, "a message of the highest tag");
  COMM_MP_CHECK(r1.state == comm::Completion::done && b == 0xA, state(r1));
}

// True if `call` throws comm::Error(invalid_argument): a usage error, refused before anything is sent.
template <class Call>
bool rejects(Call&& call) {
  try {
    call();
  } catch (const comm::Error& e) {
    return e.code() == comm::ErrorCode::invalid_argument;
  }
  return false;
}

// How long t.wait() took after interrupt() with a 5 s deadline, then with
// nothing to do and a 50 ms deadline (after progress() found nothing more).
struct WaitTimes {
  Clock::duration interrupted;
  Clock::duration idle;
};

inline WaitTimes time_waits(comm::Transport& t) {
  WaitTimes w{};
  const auto start = Clock::now();
  t.interrupt();
  t.wait(start + std::chrono::seconds(5));
  w.interrupted = Clock::now() - start;
  while (t.progress()) {
  }
  const auto w0 = Clock::now();
  t.wait(w0 + std::chrono::milliseconds(50));
  w.idle = Clock::now() - w0;
  return w;
}

// Waits until counter `key` of `store` reaches `target` (polling every
// millisecond); fails after 30 s naming the key.
inline void wait_for_count(comm::Store& store, const std::string& key, std::int64_t target) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (store.add(key, 0) < target) {
    if (Clock::now() > deadline) fail("the other ranks did not reach '" + key + "' in 30 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace mptest
