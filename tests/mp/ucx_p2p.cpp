// comm-ucx-p2p: exercises the UCX transport directly (no communicator) in real
// processes started by commrun (rank, size and store come from the environment).
//
//   comm-ucx-p2p check                 sizes, ordering, truncation, cancel, wait/interrupt
//   comm-ucx-p2p links [--expect-kind K] [--expect-lane A|B]   the link to every peer
//   comm-ucx-p2p fault [--kill R]      rank R dies (run with commrun --allow-fail R);
//                                      the others must see peer_failed within seconds
//   comm-ucx-p2p pingpong [--size B] [--iters N]   half round trip, ranks 0 and 1
//   comm-ucx-p2p cancel-send           rank 0 cancels a send rank 1 has not matched
//
// Exit status: 0 pass, 1 fail, 2 bad usage, 77 skipped (no UCX in this build).
#include "mp_test_util.hpp"

#include <comm/comm.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using comm::Completion;
using comm::ErrorCode;
using comm::Transport;

struct Options {
  std::string mode;
  int kill = 1;
  std::size_t size = 8;
  int iters = 20000;
  std::string expect_kind;
  std::string expect_lane;  // alternatives separated by '|'
};

using mptest::fail;
using mptest::pattern;
using mptest::state;

// Drives `t` until every completion in `cs` left pending, or throws timeout.
// `spin` chooses between polling and the transport's blocking wait.
void drive(Transport& t, std::initializer_list<Completion*> cs, bool spin = false,
           std::chrono::milliseconds timeout = std::chrono::milliseconds(20'000)) {
  if (!mptest::drive_for(t, cs, timeout, spin)) throw comm::Error(ErrorCode::timeout, "drive: timed out");
}

// The fault test's waits: a timeout is reported before the transport closes,
// or the peers would see this rank leave and fail first, hiding the cause.
void drive_or_fail(Transport& t, std::initializer_list<Completion*> cs, int timeout_ms,
                   const std::string& what) {
  if (!mptest::drive_for(t, cs, std::chrono::milliseconds(timeout_ms), false))
    fail(what + " within " + std::to_string(timeout_ms) + " ms");
}

// Every rank sends to every other rank the same size list; receivers check content.
void check_exchange(Transport& t) {
  const int n = t.size(), me = t.rank();
  const std::size_t sizes[] = {0, 1, 8, 93, 94, 4097, 8256, 65536, (1u << 20) + 3, 8u << 20};
  for (std::size_t s : sizes) {
    std::vector<std::vector<unsigned char>> out(n), in(n);
    std::vector<Completion> sc(n), rc(n);
    for (int p = 0; p < n; ++p) {
      out[p].resize(s);
      for (std::size_t i = 0; i < s; ++i) out[p][i] = pattern(me, p, i);
      in[p].assign(s + mptest::kGuardBytes, mptest::kGuard);  // room to spot an overrun
      t.irecv(p, 1000 + s % 4096, in[p].data(), s, rc[p]);
    }
    for (int p = 0; p < n; ++p) t.isend(p, 1000 + s % 4096, out[p].data(), s, sc[p]);
    for (int p = 0; p < n; ++p) {
      drive(t, {&sc[p], &rc[p]});
      COMM_MP_CHECK(sc[p].state == Completion::done, "send of " + std::to_string(s) + " B: " + state(sc[p]));
      COMM_MP_CHECK(rc[p].state == Completion::done && rc[p].bytes == s,
            "recv of " + std::to_string(s) + " B from " + std::to_string(p) + ": " + state(rc[p]));
      mptest::expect_pattern(in[p], s, p, me, std::to_string(s) + " B from rank " + std::to_string(p));
    }
  }
}

void check_order_and_errors(Transport& t) {
  const int me = t.rank(), n = t.size();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  // Same tag, 16 messages: they must match in posting order; tags are matched
  // exactly, including the top user bit.
  mptest::expect_tag_order(t, 7);
  const std::uint64_t big_tag = (std::uint64_t{1} << comm::kTagBits) - 1;
  std::uint64_t a = 0xA, b = 0;
  Completion s1, r1;
  // A tag above 48 bits and a peer out of range are usage errors.
  COMM_MP_CHECK(mptest::rejects([&] { t.isend(next, big_tag + 1, &a, sizeof a, s1); }), "a 49-bit tag was accepted");
  COMM_MP_CHECK(mptest::rejects([&] { t.irecv(n, 1, &b, sizeof b, r1); }), "peer == size was accepted");

  // Truncation: 4096 B into a 1000 B receive -> mismatch naming both sizes.
  std::vector<char> big(4096, 'x'), small(1000);
  Completion st, rt;
  t.irecv(prev, 9, small.data(), small.size(), rt);
  t.isend(next, 9, big.data(), big.size(), st);
  drive(t, {&st, &rt});
  COMM_MP_CHECK(rt.state == Completion::failed && rt.code == ErrorCode::mismatch, state(rt));
  COMM_MP_CHECK(rt.message.find("1000 B") != std::string::npos, rt.message);
  std::printf("rank %d: truncation reported as: %s\n", me, rt.message.c_str());
  // Same for a rendezvous-sized message, and the send side must not hang.
  std::vector<char> huge(1 << 20, 'y'), half(1 << 19);
  Completion sh, rh;
  t.irecv(prev, 10, half.data(), half.size(), rh);
  t.isend(next, 10, huge.data(), huge.size(), sh);
  drive(t, {&rh});
  COMM_MP_CHECK(rh.state == Completion::failed && rh.code == ErrorCode::mismatch, state(rh));
  drive(t, {&sh});

  // Cancel an unmatched receive: it ends failed (aborted), and is never touched again.
  std::uint64_t never = 0;
  Completion rc_cancel;
  t.irecv(prev, 11, &never, sizeof never, rc_cancel);
  t.progress();
  COMM_MP_CHECK(rc_cancel.is_pending(), state(rc_cancel));
  t.cancel(rc_cancel);
  COMM_MP_CHECK(rc_cancel.state == Completion::failed && rc_cancel.code == ErrorCode::aborted,
        state(rc_cancel));
  // cancel of a finished op is a no-op
  std::uint64_t one = 1, got = 0;
  Completion fs, fr;
  t.irecv(prev, 12, &got, sizeof got, fr);
  t.isend(next, 12, &one, sizeof one, fs);
  drive(t, {&fs, &fr});
  t.cancel(fs);
  COMM_MP_CHECK(fs.state == Completion::done, state(fs));

  // interrupt() wakes wait() well before its deadline; wait() honours its
  // deadline when nothing happens.
  const mptest::WaitTimes w = mptest::time_waits(t);
  COMM_MP_CHECK(w.interrupted < std::chrono::seconds(2), "interrupt() did not wake wait()");
  COMM_MP_CHECK(w.idle < std::chrono::seconds(2), "wait() overslept its deadline");
}

void check_links(Transport& t, const Options& o) {
  for (int p = 0; p < t.size(); ++p) {
    const auto l = t.link(p);
    std::printf("rank %d -> %d: %s alpha=%.2fus beta=%.1fGB/s detail=\"%s\"\n", t.rank(), p,
                std::string(comm::to_string(l.kind)).c_str(), l.alpha_us, l.beta_gbps,
                l.detail.c_str());
    if (p == t.rank()) {
      COMM_MP_CHECK(l.kind == comm::LinkKind::self, "self link is " + std::string(comm::to_string(l.kind)));
      continue;
    }
    if (!o.expect_kind.empty())
      COMM_MP_CHECK(comm::to_string(l.kind) == o.expect_kind, "expected " + o.expect_kind);
    if (!o.expect_lane.empty()) {
      bool found = false;
      for (std::size_t pos = 0; pos <= o.expect_lane.size();) {
        const auto bar = std::min(o.expect_lane.find('|', pos), o.expect_lane.size());
        found = found || l.detail.find(o.expect_lane.substr(pos, bar - pos)) != std::string::npos;
        pos = bar + 1;
      }
      COMM_MP_CHECK(found, "expected a lane named " + o.expect_lane);
    }
  }
}

// UCX 1.13 cannot withdraw a send in flight: cancel() of a rendezvous send the
// receiver has not matched closes the endpoint. Rank 0 cancels; rank 1 then
// posts the matching receive, which must end (the sender's endpoint is gone)
// instead of hanging.
void run_cancel_send(Transport& t, comm::Store& store) {
  if (t.rank() > 1) return;
  std::vector<char> big(4 << 20, 'z');
  if (t.rank() == 0) {
    Completion s;
    t.isend(1, 77, big.data(), big.size(), s);
    for (int i = 0; i < 100; ++i) t.progress();
    COMM_MP_CHECK(s.is_pending(), "a 4 MiB send completed without a receiver: " + state(s));
    const auto start = Clock::now();
    t.cancel(s);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    COMM_MP_CHECK(s.state == Completion::failed && s.code == ErrorCode::aborted, state(s));
    COMM_MP_CHECK(ms < 3000, "cancel() took " + std::to_string(ms) + " ms");
    std::printf("rank 0: cancel of an unmatched 4 MiB send took %.1f ms: %s\n", ms, s.message.c_str());
    Completion later;
    t.isend(1, 78, big.data(), 8, later);
    COMM_MP_CHECK(later.state == Completion::failed, "send after the endpoint closed: " + state(later));
    store.set("p2p/cancelled", "1");
  } else {
    // Keep progressing meanwhile, as a rank waiting on the transfer would.
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!store.check("p2p/cancelled")) {
      if (Clock::now() > deadline) fail("rank 0 did not cancel within 30 s");
      t.progress();
      ::usleep(1000);
    }
    Completion r;
    t.irecv(0, 77, big.data(), big.size(), r);
    try {
      drive(t, {&r}, false, std::chrono::milliseconds(10'000));
    } catch (const comm::Error&) {
      fail("the receive of a cancelled send hung for 10 s");
    }
    std::printf("rank 1: receive of the cancelled send ended: %s\n", state(r).c_str());
  }
}

void run_fault(Transport& t, const Options& o, comm::Store& store) {
  const int me = t.rank(), n = t.size();
  // Wire every endpoint up first: one message around the ring, then a barrier.
  std::uint64_t x = me, y = 0;
  Completion s0, r0;
  t.irecv((me + n - 1) % n, 1, &y, sizeof y, r0);
  t.isend((me + 1) % n, 1, &x, sizeof x, s0);
  drive(t, {&s0, &r0});
  COMM_MP_CHECK(r0.state == Completion::done, state(r0));
  // A receive from a live rank that nobody sends: a death anywhere ends it too
  // (the group's collectives cannot complete), naming the dead rank. It is
  // posted before this rank counts itself wired, so it is pending when the
  // victim dies: a receive posted after the death was handled runs normally.
  const int live = (o.kill + 1) % n == me ? (o.kill + 2) % n : (o.kill + 1) % n;
  Completion rl;
  std::uint64_t unused = 0;
  if (me != o.kill && live != me) t.irecv(live, 6, &unused, sizeof unused, rl);
  store.add("p2p/wired", 1);
  while (store.add("p2p/wired", 0) < n) t.progress();
  if (me == o.kill) {
    ::kill(::getpid(), SIGKILL);
  }
  // Survivors: a receive from the dead rank must fail as peer_failed within seconds.
  std::uint64_t never = 0;
  Completion rd;
  const auto start = Clock::now();
  t.irecv(o.kill, 2, &never, sizeof never, rd);
  drive_or_fail(t, {&rd}, 15'000, "no failure reported for dead rank " + std::to_string(o.kill));
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  COMM_MP_CHECK(rd.state == Completion::failed && rd.code == ErrorCode::peer_failed, state(rd));
  COMM_MP_CHECK(rd.message.find("rank " + std::to_string(o.kill)) != std::string::npos, rd.message);
  std::printf("rank %d: dead rank %d detected after %.1f ms: %s\n", me, o.kill, ms,
              rd.message.c_str());
  if (live != me) {
    drive_or_fail(t, {&rl}, 5'000, "the receive from live rank " + std::to_string(live) + " pending at the death did not end");
    COMM_MP_CHECK(rl.state == Completion::failed && rl.code == ErrorCode::peer_failed, state(rl));
    COMM_MP_CHECK(rl.message.find("rank " + std::to_string(o.kill) + " failed") != std::string::npos, rl.message);
  }
  // Later operations on the dead rank fail at once.
  Completion s2, r2;
  t.isend(o.kill, 3, &x, sizeof x, s2);
  drive_or_fail(t, {&s2}, 5'000, "a send to the dead rank did not fail");
  COMM_MP_CHECK(s2.state == Completion::failed && s2.code == ErrorCode::peer_failed, state(s2));
  t.irecv(o.kill, 3, &y, sizeof y, r2);
  drive_or_fail(t, {&r2}, 5'000, "a receive from the dead rank did not fail");
  COMM_MP_CHECK(r2.state == Completion::failed && r2.code == ErrorCode::peer_failed, state(r2));
  // The survivors still talk to each other.
  std::vector<int> alive;
  for (int p = 0; p < n; ++p)
    if (p != o.kill) alive.push_back(p);
  if (alive.size() >= 2) {
    const auto pos = std::find(alive.begin(), alive.end(), me) - alive.begin();
    const int next = alive[(pos + 1) % alive.size()];
    const int prev = alive[(pos + alive.size() - 1) % alive.size()];
    Completion s3, r3;
    std::uint64_t v = 100 + me, w = 0;
    t.irecv(prev, 4, &w, sizeof w, r3);
    t.isend(next, 4, &v, sizeof v, s3);
    drive_or_fail(t, {&s3, &r3}, 20'000, "survivors " + std::to_string(prev) + " -> " + std::to_string(me) +
                                           " -> " + std::to_string(next) + " did not exchange");
    COMM_MP_CHECK(r3.state == Completion::done && w == static_cast<std::uint64_t>(100 + prev), state(r3));
  }
}

// Ping-pong between ranks 0 and 1, first polling progress() only, then with
// the transport's blocking wait(). Prints the median (what ucx_perftest calls
// "typical") and the mean half round trip; the mean is the one to compare
// with bandwidth figures, the median the one to compare with perftest.
void run_pingpong(Transport& t, const Options& o) {
  if (t.rank() > 1) return;
  const int peer = 1 - t.rank();
  std::vector<char> sbuf(o.size, 1), rbuf(o.size);
  std::vector<double> samples(static_cast<std::size_t>(o.iters));
  for (const bool spin : {true, false}) {
    const int warm = o.iters / 10;
    Clock::time_point start;
    for (int i = 0; i < warm + o.iters; ++i) {
      if (i == warm) start = Clock::now();
      const auto t0 = Clock::now();
      Completion sc, rc;
      if (t.rank() == 0) {
        t.irecv(peer, 5, rbuf.data(), rbuf.size(), rc);
        t.isend(peer, 5, sbuf.data(), sbuf.size(), sc);
        drive(t, {&sc, &rc}, spin);
      } else {
        t.irecv(peer, 5, rbuf.data(), rbuf.size(), rc);
        drive(t, {&rc}, spin);
        t.isend(peer, 5, sbuf.data(), sbuf.size(), sc);
        drive(t, {&sc}, spin);
      }
      if (i >= warm)
        samples[static_cast<std::size_t>(i - warm)] =
            std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2;
    }
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    std::nth_element(samples.begin(), samples.begin() + o.iters / 2, samples.end());
    if (t.rank() == 0)
      std::printf("pingpong %zu B (%s): half round trip median %.3f us, mean %.3f us; %.2f GB/s\n",
                  o.size, spin ? "polling" : "blocking wait", samples[static_cast<std::size_t>(o.iters / 2)],
                  us / (2.0 * o.iters), 2.0 * o.iters * static_cast<double>(o.size) / us / 1e3);
  }
}

int run_rank(const Options& o) {
  comm::Config cfg = comm::Config::from_env();
  cfg.timeout = std::chrono::milliseconds(30'000);
  auto store = comm::make_store(cfg);
  mptest::g_rank = cfg.rank;
  const comm::TransportInit init = mptest::transport_init(cfg, comm::make_prefix_store(store, "p2p/"));
  auto t = comm::create_transport("ucx", init);
  if (o.mode == "check") {
    check_links(*t, o);
    check_exchange(*t);
    check_order_and_errors(*t);
  } else if (o.mode == "links") {
    check_links(*t, o);
  } else if (o.mode == "cancel-send") {
    run_cancel_send(*t, *store);
  } else if (o.mode == "fault") {
    if (o.kill < 0 || o.kill >= t->size() || t->size() < 2)
      fail("--kill " + std::to_string(o.kill) + " needs a rank of a group of 2 or more");
    run_fault(*t, o, *store);
  } else {
    run_pingpong(*t, o);
  }
  // Nobody closes before everyone finished: a closed endpoint looks like a
  // dead peer to the ranks still using it. Rank 0 hosts the store: it leaves last.
  const std::int64_t alive = o.mode == "fault" ? cfg.world_size - 1 : cfg.world_size;
  store->add("p2p/done", 1);
  mptest::wait_for_count(*store, "p2p/done", alive);
  t.reset();
  if (cfg.rank == 0) mptest::wait_for_count(*store, "p2p/left", alive - 1);
  else store->add("p2p/left", 1);
  std::printf("rank %d: %s passed\n", cfg.rank, o.mode.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered: fail() ends the process with _Exit, and a killed rank flushes nothing.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o;
  try {
    if (argc < 2) throw std::invalid_argument("missing mode");
    o.mode = argv[1];
    if (o.mode != "check" && o.mode != "links" && o.mode != "fault" && o.mode != "pingpong" &&
        o.mode != "cancel-send")
      throw std::invalid_argument("unknown mode " + o.mode);
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      const std::string v = argv[++i];
      if (a == "--kill") o.kill = std::stoi(v);
      else if (a == "--size") o.size = std::stoull(v);
      else if (a == "--iters") o.iters = std::stoi(v);
      else if (a == "--expect-kind") o.expect_kind = v;
      else if (a == "--expect-lane") o.expect_lane = v;
      else throw std::invalid_argument("unknown option " + a);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "%s\nusage: comm-ucx-p2p check|links|fault|pingpong|cancel-send [--kill R] "
                 "[--size B] [--iters N] [--expect-kind K] [--expect-lane L]\n",
                 e.what());
    return 2;
  }
  mptest::require_transport("ucx");
  try {
    return run_rank(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
}
