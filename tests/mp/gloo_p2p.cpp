// comm-gloo-p2p: exercises the Gloo transport directly (no communicator) in
// real processes started by commrun (which sets COMM_RANK/COMM_WORLD_SIZE/
// COMM_STORE).
//
//   commrun -n N comm-gloo-p2p check        sizes, self messages, ordering, usage errors, links
//   commrun -n 2 comm-gloo-p2p pingpong [iters]  8 B half round trip between ranks 0 and 1
//   commrun -n 2 comm-gloo-p2p mismatch     sizes that differ never match (no crash); cancel
//                                           closes the transport, which then fails fast
//
// Exit status: 0 pass, 1 fail, 77 skipped (no Gloo in this build).
#include "mp_test_util.hpp"

#include <comm/comm.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using comm::Completion;
using comm::ErrorCode;
using comm::Transport;
using mptest::fail;
using mptest::pattern;
using mptest::state;
using namespace std::chrono_literals;

// Drives `t` until none of `cs` is pending; fails the test after `limit`.
void drive(Transport& t, std::initializer_list<Completion*> cs, std::chrono::milliseconds limit = 20s) {
  if (!mptest::drive_for(t, cs, limit))
    fail("operations still pending after " + std::to_string(limit.count()) + " ms");
}

void check_links(Transport& t) {
  for (int p = 0; p < t.size(); ++p) {
    const comm::LinkInfo l = t.link(p);
    std::printf("rank %d -> %d: %s alpha=%.1fus beta=%.1fGB/s \"%s\"\n", t.rank(), p,
                std::string(comm::to_string(l.kind)).c_str(), l.alpha_us, l.beta_gbps, l.detail.c_str());
    if (p == t.rank()) {
      COMM_MP_CHECK(l.kind == comm::LinkKind::self, l.detail);
    } else {
      COMM_MP_CHECK(l.kind == comm::LinkKind::tcp, l.detail);
      // commrun starts every rank on this host: loopback, never another address.
      COMM_MP_CHECK(l.detail == "gloo tcp 127.0.0.1 (same host)", l.detail);
      COMM_MP_CHECK(l.alpha_us > 10 && l.beta_gbps > 0.5, l.detail);
    }
  }
}

// Every rank sends every size to every rank, itself included.
void check_exchange(Transport& t) {
  const int n = t.size(), me = t.rank();
  const std::size_t sizes[] = {0, 1, 7, 4096, (1u << 20) + 3, 5u << 20};
  for (std::size_t s : sizes) {
    std::vector<std::vector<unsigned char>> out(n), in(n);
    std::vector<Completion> sc(n), rc(n);
    const std::uint64_t tag = 100 + s % 1000;
    for (int p = 0; p < n; ++p) {
      out[p].resize(s);
      for (std::size_t i = 0; i < s; ++i) out[p][i] = pattern(me, p, i);
      in[p].assign(s + mptest::kGuardBytes, mptest::kGuard);
      // Post half the receives after the sends, to cover both matching orders.
      if ((me + p) % 2 == 0) t.irecv(p, tag, in[p].data(), s, rc[p]);
    }
    for (int p = 0; p < n; ++p) t.isend(p, tag, out[p].data(), s, sc[p]);
    for (int p = 0; p < n; ++p)
      if ((me + p) % 2 != 0) t.irecv(p, tag, in[p].data(), s, rc[p]);
    for (int p = 0; p < n; ++p) {
      drive(t, {&sc[p], &rc[p]});
      COMM_MP_CHECK(sc[p].state == Completion::done && sc[p].bytes == s, state(sc[p]));
      COMM_MP_CHECK(rc[p].state == Completion::done && rc[p].bytes == s,
            "recv of " + std::to_string(s) + " B from " + std::to_string(p) + ": " + state(rc[p]));
      mptest::expect_pattern(in[p], s, p, me, std::to_string(s) + " B from rank " + std::to_string(p));
    }
  }
}

void check_order_and_usage(Transport& t) {
  const int me = t.rank(), n = t.size();
  const int next = (me + 1) % n;
  mptest::expect_tag_order(t, 7);
  // One above the highest 48-bit tag and a bad peer are usage errors.
  const std::uint64_t big_tag = (std::uint64_t{1} << comm::kTagBits) - 1;
  std::uint64_t a = 0xA, b = 0;
  Completion unused;
  COMM_MP_CHECK(mptest::rejects([&] { t.isend(next, big_tag + 1, &a, sizeof a, unused); }),
                "a 49-bit tag was accepted");
  COMM_MP_CHECK(mptest::rejects([&] { t.irecv(n, 1, &b, sizeof b, unused); }), "peer == size was accepted");

  // A message to self that is too long fails both sides with mismatch.
  std::vector<char> big(64, 'x'), small(16);
  Completion ss, sr;
  t.irecv(me, 9, small.data(), small.size(), sr);
  t.isend(me, 9, big.data(), big.size(), ss);
  COMM_MP_CHECK(sr.state == Completion::failed && sr.code == ErrorCode::mismatch, state(sr));

  // interrupt() wakes wait() long before its deadline, even if it came first.
  const mptest::WaitTimes w = mptest::time_waits(t);
  COMM_MP_CHECK(w.interrupted < 1s, "interrupt() did not wake wait()");
  COMM_MP_CHECK(w.idle < 1s, "wait() overslept its deadline");
  COMM_MP_CHECK(w.idle >= 45ms, "wait() returned early with nothing to report");
}

void pingpong(Transport& t, int iters) {
  if (t.rank() > 1) return;
  const int peer = 1 - t.rank();
  std::uint64_t out = 1, in = 0;
  auto round = [&] {
    Completion s, r;
    if (t.rank() == 0) {
      t.isend(peer, 3, &out, sizeof out, s);
      t.irecv(peer, 3, &in, sizeof in, r);
    } else {
      t.irecv(peer, 3, &in, sizeof in, r);
      drive(t, {&r});
      t.isend(peer, 3, &out, sizeof out, s);
    }
    drive(t, {&s, &r});
    COMM_MP_CHECK(r.state == Completion::done && s.state == Completion::done, state(r) + " / " + state(s));
  };
  for (int i = 0; i < 50; ++i) round();
  std::vector<double> us;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    round();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2);
  }
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double v : us) sum += v;
  if (t.rank() == 0)
    std::printf("gloo 8 B half round trip over %d iterations: median %.1f us, mean %.1f us, p10 %.1f us, p90 %.1f us\n",
                iters, us[us.size() / 2], sum / static_cast<double>(us.size()), us[us.size() / 10],
                us[us.size() * 9 / 10]);
}

void mismatch(Transport& t) {
  if (t.rank() > 1) return;
  // Rank 0 sends 100 B; rank 1 expects 200 B under the same tag.
  std::vector<char> buf(200, 'z');
  Completion c;
  const std::size_t bytes = t.rank() == 0 ? 100 : 200;
  if (t.rank() == 0)
    t.isend(1, 42, buf.data(), bytes, c);
  else
    t.irecv(0, 42, buf.data(), bytes, c);
  const auto until = Clock::now() + 1500ms;
  while (Clock::now() < until) {
    t.progress();
    t.wait(until);
  }
  COMM_MP_CHECK(c.is_pending(), "a " + std::to_string(bytes) + " B operation matched one of another size: " + state(c));
  if (t.rank() == 1) {
    // Cancelling a posted Gloo operation closes the connections: the transport
    // must fail fast afterwards and the peer must see its send fail.
    t.cancel(c);
    COMM_MP_CHECK(c.state == Completion::failed && c.code == ErrorCode::aborted, state(c));
    Completion after;
    const auto t0 = Clock::now();
    t.isend(0, 43, buf.data(), 8, after);
    COMM_MP_CHECK(after.state == Completion::failed && after.code == ErrorCode::transport_failure, state(after));
    COMM_MP_CHECK(Clock::now() - t0 < 100ms, "a call on a failed transport did not fail fast");
    std::printf("rank 1: after cancel: %s\n", after.message.c_str());
  } else {
    drive(t, {&c}, 10s);
    COMM_MP_CHECK(c.state == Completion::failed && c.code == ErrorCode::peer_failed, state(c));
    std::printf("rank 0: send after peer closed: %s\n", c.message.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "check";
  mptest::require_transport("gloo");
  try {
    comm::Config cfg = comm::Config::from_env();
    mptest::g_rank = cfg.rank;
    const comm::TransportInit init =
        mptest::transport_init(cfg, comm::make_prefix_store(comm::make_store(cfg), "gloo-p2p/"));
    auto t = comm::create_transport("gloo", init);
    if (mode == "check") {
      check_links(*t);
      check_exchange(*t);
      check_order_and_usage(*t);
    } else if (mode == "pingpong") {
      pingpong(*t, argc > 2 ? std::atoi(argv[2]) : 2000);
    } else if (mode == "mismatch") {
      mismatch(*t);
    } else {
      std::fprintf(stderr, "usage: comm-gloo-p2p check|pingpong [iters]|mismatch\n");
      return 2;
    }
    // Keep the connections up until every rank is done with them, and rank 0
    // (which hosts the store) up until every other rank has stopped using it.
    init.store->add("done", 1);
    mptest::wait_for_count(*init.store, "done", cfg.world_size);
    if (cfg.rank != 0)
      init.store->add("left", 1);
    else
      mptest::wait_for_count(*init.store, "left", cfg.world_size - 1);
  } catch (const comm::Error& e) {
    fail(std::string("comm::Error(") + std::string(comm::to_string(e.code())) + "): " + e.what());
  }
  std::printf("rank %d: PASS %s\n", mptest::g_rank, mode.c_str());
  return 0;
}
