// Point-to-point floor of the `ofi` transport between two processes, measured
// the way fi_pingpong measures libfabric itself: 8 B half round trip and
// one-way streaming bandwidth of large messages. Every payload is checked.
//
//   commrun -n 2 -- comm-ofi-pingpong [--iters 10000] [--bytes 16M] [--large-iters 50] [--poll]
//   (COMM_OFI_PROVIDER / FI_PROVIDER choose the provider)
//
// --poll drives the transport with progress() only (as fi_pingpong does);
// the default also calls wait() when progress() finds nothing, as the
// executor does, so the number includes the cost of the transport's waiting.

#include <comm/comm.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int iters = 10000;
  std::size_t bytes = std::size_t{16} << 20;
  int large_iters = 50;
  bool poll_only = false;
};

bool g_poll_only = false;

void drive(comm::Transport& t, comm::Completion& a, comm::Completion* b = nullptr) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (a.is_pending() || (b && b->is_pending())) {
    if (t.progress() || g_poll_only) continue;
    if (Clock::now() > deadline) break;
    t.wait(deadline);
  }
  for (comm::Completion* c : {&a, b}) {
    if (!c) continue;
    if (c->is_pending()) throw comm::Error(comm::ErrorCode::timeout, "ofi_pingpong: an operation took over 60 s");
    if (c->state.load() == comm::Completion::failed) throw comm::Error(c->code, c->message);
  }
}

int run(const Options& o) {
  comm::Config cfg = comm::Config::from_env();
  if (cfg.world_size != 2) {
    std::fprintf(stderr, "ofi_pingpong needs exactly 2 ranks (COMM_WORLD_SIZE=%d)\n", cfg.world_size);
    return 2;
  }
  auto store = comm::make_store(cfg);
  comm::TransportInit init;
  init.rank = cfg.rank;
  init.size = 2;
  init.store = store;
  init.config = &cfg;
  auto t = comm::create_transport("ofi", init);
  const int peer = 1 - cfg.rank;
  const bool lead = cfg.rank == 0;

  // Latency: 8 B, each message carrying its iteration number.
  std::uint64_t out = 0, in = 0;
  const int warmup = 100;
  Clock::time_point start;
  for (int i = -warmup; i < o.iters; ++i) {
    if (i == 0) start = Clock::now();
    comm::Completion s, r;
    out = static_cast<std::uint64_t>(i + warmup) * 2 + (lead ? 0 : 1);
    if (lead) {
      t->irecv(peer, 1, &in, sizeof in, r);
      t->isend(peer, 1, &out, sizeof out, s);
      drive(*t, s, &r);
    } else {
      t->irecv(peer, 1, &in, sizeof in, r);
      drive(*t, r);
      t->isend(peer, 1, &out, sizeof out, s);
      drive(*t, s);
    }
    const std::uint64_t expect = static_cast<std::uint64_t>(i + warmup) * 2 + (lead ? 1 : 0);
    if (in != expect) {
      std::fprintf(stderr, "ofi_pingpong: iteration %d received %llu, expected %llu\n", i,
                   static_cast<unsigned long long>(in), static_cast<unsigned long long>(expect));
      return 1;
    }
  }
  const double lat_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / (2.0 * o.iters);

  // Bandwidth: rank 0 streams large messages, two in flight; rank 1 keeps two
  // receives posted and acknowledges the last message.
  std::vector<std::uint8_t> buf[2] = {std::vector<std::uint8_t>(o.bytes), std::vector<std::uint8_t>(o.bytes)};
  comm::Completion c[2];
  int ack = 0;
  const int total = o.large_iters + 2;  // two warm-up messages
  if (!lead)
    for (int k = 0; k < 2; ++k) t->irecv(peer, 2, buf[k].data(), o.bytes, c[k]);
  for (int i = 0; i < total; ++i) {
    auto& b = buf[i % 2];
    if (i == 2) start = Clock::now();
    if (lead) {
      if (i >= 2) drive(*t, c[i % 2]);
      b.front() = static_cast<std::uint8_t>(i);
      b.back() = static_cast<std::uint8_t>(i * 7);
      t->isend(peer, 2, b.data(), b.size(), c[i % 2]);
    } else {
      drive(*t, c[i % 2]);
      if (c[i % 2].bytes != o.bytes || b.front() != static_cast<std::uint8_t>(i) ||
          b.back() != static_cast<std::uint8_t>(i * 7)) {
        std::fprintf(stderr, "ofi_pingpong: large message %d arrived corrupted\n", i);
        return 1;
      }
      if (i + 2 < total) t->irecv(peer, 2, b.data(), o.bytes, c[i % 2]);
    }
  }
  comm::Completion a;
  if (lead) {
    drive(*t, c[0], &c[1]);
    t->irecv(peer, 3, &ack, sizeof ack, a);
  } else {
    ack = 1;
    t->isend(peer, 3, &ack, sizeof ack, a);
  }
  drive(*t, a);
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  const double gbps = static_cast<double>(o.bytes) * o.large_iters / secs / 1e9;
  if (lead) {
    const comm::LinkInfo l = t->link(peer);
    std::printf("ofi_pingpong: %s, %s: 8 B half round trip %.2f us (%d iters); %zu B one-way %.2f GB/s (%d msgs)\n",
                l.detail.c_str(), o.poll_only ? "progress() only" : "progress()+wait()", lat_us, o.iters, o.bytes,
                gbps, o.large_iters);
    if (ack != 1) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) o.iters = std::atoi(argv[++i]);
    else if (a == "--bytes" && i + 1 < argc) o.bytes = comm::parse_bytes(argv[++i], "--bytes");
    else if (a == "--large-iters" && i + 1 < argc) o.large_iters = std::atoi(argv[++i]);
    else if (a == "--poll") o.poll_only = true;
    else {
      std::fprintf(stderr, "usage: %s [--iters N] [--bytes B] [--large-iters N] [--poll]\n", argv[0]);
      return 2;
    }
  }
  if (o.iters < 1 || o.large_iters < 1 || o.bytes < 2) {
    std::fprintf(stderr, "ofi_pingpong: --iters and --large-iters must be >= 1, --bytes >= 2\n");
    return 2;
  }
  g_poll_only = o.poll_only;
  try {
    return run(o);
  } catch (const comm::Error& e) {
    std::fprintf(stderr, "ofi_pingpong: %s (%s)\n", e.what(), std::string(comm::to_string(e.code())).c_str());
    return 1;
  }
}
