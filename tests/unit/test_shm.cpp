// The shm transport in one process (ranks as threads, each with its own
// mapping of the real segment and its own liveness lock): layout, the segment
// handshake and its cleanup, point-to-point semantics, the direct-memory
// engine over real windows, and how waits end (abort, timeout, a peer that
// left). Process-level behaviour (SIGKILL, two jobs) is in tests/mp/shm.cmake.

#include "engine/direct/direct_engine.hpp"
#include "transports/shm/shm_segment.hpp"
#include "transports/shm/shm_transport.hpp"

#include <comm/comm.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <unistd.h>
#include <numeric>
#include <regex>
#include <thread>
#include <vector>

namespace {

using namespace comm;
using Clock = std::chrono::steady_clock;

// n transports of one group, created concurrently (the handshake needs everyone).
std::vector<std::unique_ptr<Transport>> make_group(int n, const std::map<std::string, std::string>& options = {}) {
  auto store = make_memory_store();
  std::vector<std::unique_ptr<Transport>> t(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      Config cfg;
      cfg.rank = r;
      cfg.world_size = n;
      cfg.timeout = std::chrono::milliseconds(20'000);
      cfg.transport_options = options;
      try {
        t[static_cast<std::size_t>(r)] = create_transport("shm", TransportInit{r, n, store, &cfg, nullptr});
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (auto& e : errors) REQUIRE(e == "");
  return t;
}

// Runs fn(rank) on n threads at once.
void on_ranks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& th : threads) th.join();
}

bool drive(Transport& t, const std::vector<Completion*>& cs) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  for (;;) {
    bool pending = false;
    for (auto* c : cs) pending = pending || c->is_pending();
    if (!pending) return true;
    if (Clock::now() > deadline) return false;
    if (!t.progress()) t.wait(Clock::now() + std::chrono::milliseconds(5));
  }
}

shm::ShmTransport& shm_of(Transport& t) { return dynamic_cast<shm::ShmTransport&>(t); }

}  // namespace

TEST_CASE("shm layout: regions are disjoint, windows staggered through their pages, sizes bounded") {
  for (int n : {1, 2, 3, 4, 8, 13, 16}) {
    const shm::Layout l = shm::Layout::compute(n, 0, "COMM_SHM_SIZE");
    INFO("n=" << n);
    CHECK(l.control_off >= sizeof(shm::Header));
    CHECK(l.pairs_off >= l.control_off + static_cast<std::size_t>(n) * sizeof(shm::RankControl));
    std::size_t last_pair_end = l.pairs_off;
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b) last_pair_end = std::max(last_pair_end, l.pair_offset(a, b) + l.pair_stride);
    CHECK(last_pair_end <= l.windows_off);
    CHECK(l.window_offset(n - 1, shm::kSlots - 1) + l.window_bytes + shm::kWindowStagger == l.total);
    CHECK(l.window_offset(0, 0) % 4096 == 0);
    CHECK(l.window_bytes % 4096 == 0);
    // Windows in order, disjoint, line-aligned, each at its own page offset
    // (no two flags alias in the low 12 address bits).
    std::vector<std::size_t> page_offsets;
    for (int r = 0; r < n; ++r)
      for (unsigned s = 0; s < shm::kSlots; ++s) {
        const std::size_t at = l.window_offset(r, s);
        CHECK(at % 64 == 0);
        if (r + s > 0) CHECK(at >= l.window_offset(s ? r : r - 1, s ? s - 1 : shm::kSlots - 1) + l.window_bytes);
        page_offsets.push_back(at % 4096);
      }
    std::sort(page_offsets.begin(), page_offsets.end());
    CHECK(std::adjacent_find(page_offsets.begin(), page_offsets.end()) == page_offsets.end());
    // Every pair has its own region.
    std::vector<std::size_t> offs;
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b) offs.push_back(l.pair_offset(a, b));
    std::sort(offs.begin(), offs.end());
    CHECK(std::adjacent_find(offs.begin(), offs.end()) == offs.end());
  }
  const shm::Layout sized = shm::Layout::compute(4, std::size_t{64} << 20, "COMM_SHM_SIZE");
  CHECK(sized.total <= std::size_t{64} << 20);
  CHECK(sized.window_bytes > std::size_t{4} << 20);
  try {
    shm::Layout::compute(4, 100'000, "COMM_SHM_SIZE");
    FAIL("a 100 kB segment for 4 ranks was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_config);
    CHECK(std::string(e.what()).find("COMM_SHM_SIZE") != std::string::npos);
    CHECK(std::string(e.what()).find("needs at least") != std::string::npos);
  }
}

TEST_CASE("shm segment: unguessable names, unlinked once every rank mapped it") {
  // The creator's pid after the transport's name: commrun removes what a dead rank left (util/process.hpp).
  const std::regex pattern("/comm-shm-" + std::to_string(::getpid()) + "-[0-9a-f]{32}");
  const std::string a = shm::random_segment_name(), b = shm::random_segment_name();
  CHECK(std::regex_match(a, pattern));
  CHECK(a != b);
  auto group = make_group(3);
  const std::string name = shm_of(*group[0]).segment().name();
  CHECK(std::regex_match(name, pattern));
  for (auto& t : group) CHECK(shm_of(*t).segment().name() == name);
  CHECK_FALSE(std::filesystem::exists("/dev/shm" + name));  // already gone, though mapped by all
  for (int r = 0; r < 3; ++r)
    for (int q = 0; q < 3; ++q)
      if (q != r) CHECK(shm_of(*group[static_cast<std::size_t>(r)]).segment().alive(q));
  group[2].reset();  // departs: its lock goes, its state says why
  CHECK_FALSE(shm_of(*group[0]).segment().alive(2));
  CHECK(shm_of(*group[0]).segment().why_gone(2) == "closed its communicator");
}

TEST_CASE("shm settings: bad values are errors naming the setting") {
  Config cfg;
  cfg.transport_options["shm.spin_us"] = "fast";
  try {
    shm::Settings::from(cfg, 2);
    FAIL("spin_us=fast was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_config);
    CHECK(std::string(e.what()).find("shm.spin_us") != std::string::npos);
  }
  cfg.transport_options = {{"shm.cma", "0"}, {"shm.spin_us", "7"}, {"shm.size", "32M"}};
  const auto s = shm::Settings::from(cfg, 2);
  CHECK_FALSE(s.cma);
  CHECK(s.wait.spin == std::chrono::microseconds(7));
  CHECK(s.size == std::size_t{32} << 20);
}

TEST_CASE("shm point-to-point: eager and rendezvous, in posting order, unexpected, mismatch, self") {
  for (const char* cma : {"1", "0"}) {
    INFO("cma=" << cma);
    auto g = make_group(2, {{"shm.cma", cma}});
    const std::size_t sizes[] = {0, 8, 1000, 16 * 1024 + 8, 3 * 1024 * 1024 + 5};
    on_ranks(2, [&](int r) {
      Transport& t = *g[static_cast<std::size_t>(r)];
      for (std::size_t bytes : sizes) {
        std::vector<unsigned char> a(bytes), b(bytes), got_a(bytes, 0xee), got_b(bytes, 0xee);
        for (std::size_t i = 0; i < bytes; ++i) {
          a[i] = static_cast<unsigned char>(i * 7 + 1);
          b[i] = static_cast<unsigned char>(i * 13 + 5);
        }
        Completion s1, s2, r1, r2;
        if (r == 0) {  // two messages of one tag: they must arrive in posting order
          t.isend(1, 42, a.data(), bytes, s1);
          t.isend(1, 42, b.data(), bytes, s2);
          CHECK(drive(t, {&s1, &s2}));
          CHECK(s1.state == Completion::done);
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let them arrive unexpected
          t.irecv(0, 42, got_a.data(), bytes, r1);
          t.irecv(0, 42, got_b.data(), bytes, r2);
          CHECK(drive(t, {&r1, &r2}));
          CHECK(r1.state == Completion::done);
          CHECK(r1.bytes == bytes);
          CHECK(got_a == a);
          CHECK(got_b == b);
        }
      }
      // A message longer than the receive fails the receive, naming the sender and both sizes.
      std::vector<char> big(40'000, 1), small(100);
      Completion s, c;
      if (r == 0) {
        t.isend(1, 7, big.data(), big.size(), s);
        CHECK(drive(t, {&s}));
      } else {
        t.irecv(0, 7, small.data(), small.size(), c);
        CHECK(drive(t, {&c}));
        CHECK(c.state == Completion::failed);
        CHECK(c.code == ErrorCode::mismatch);
        CHECK(c.message.find("rank 0 sent 40000 B") != std::string::npos);
      }
      // Self.
      int x = 5, y = 0;
      Completion ss, sr;
      t.irecv(r, 9, &y, sizeof y, sr);
      t.isend(r, 9, &x, sizeof x, ss);
      CHECK(drive(t, {&ss, &sr}));
      CHECK(y == 5);
    });
  }
}

TEST_CASE("shm point-to-point: cancel withdraws a receive and an unmatched large send") {
  auto g = make_group(2);
  Transport& t0 = *g[0];
  Transport& t1 = *g[1];
  std::vector<char> buf(1 << 20, 0);
  Completion recv, send;
  t1.irecv(0, 3, buf.data(), buf.size(), recv);
  t1.cancel(recv);
  CHECK_FALSE(recv.is_pending());
  std::vector<char> data(1 << 20, 'x');
  t0.isend(1, 4, data.data(), data.size(), send);  // rendezvous: nobody receives it
  t0.progress();
  t0.cancel(send);
  CHECK_FALSE(send.is_pending());
  // A receive posted now must not see the withdrawn send's data.
  Completion late;
  t1.irecv(0, 4, buf.data(), buf.size(), late);
  CHECK(drive(t1, {&late}));
  CHECK(late.state == Completion::failed);
  CHECK(buf[0] == 0);
}

TEST_CASE("shm point-to-point: cancelling a send whose reader stopped mid-read ends, and the reader discards it") {
  auto g = make_group(2);
  Transport& t0 = *g[0];
  Transport& t1 = *g[1];
  std::vector<char> data(1 << 20, 'x'), buf(1 << 20, 0);
  Completion send;
  t0.isend(1, 5, data.data(), data.size(), send);  // rendezvous: an RTS and its word, posted
  t0.progress();
  // Rank 1 takes the send (posted -> reading, as start_rendezvous_recv does) and
  // stops there, as a rank frozen by SIGSTOP between its read and "done".
  const shm::Segment& seg = shm_of(t0).segment();
  auto* word = reinterpret_cast<std::atomic<std::uint64_t>*>(seg.base() + seg.layout().pair_offset(0, 1) +
                                                              sizeof(shm::RingControl));  // slot 0
  std::uint64_t posted = word->load();
  REQUIRE((posted & 0xff) == static_cast<std::uint64_t>(shm::Rendezvous::posted));
  REQUIRE(word->compare_exchange_strong(posted, (posted & ~std::uint64_t{0xff}) |
                                                    static_cast<std::uint64_t>(shm::Rendezvous::reading)));
  const auto start = Clock::now();
  t0.cancel(send);  // before: spun for as long as rank 1 stayed stopped
  CHECK(Clock::now() - start < std::chrono::seconds(2));
  CHECK(send.state == Completion::failed);
  CHECK((word->load() & 0xff) == static_cast<std::uint64_t>(shm::Rendezvous::cancelled));
  // Rank 1's receive of it now fails instead of taking whatever the buffer holds.
  Completion late;
  t1.irecv(0, 5, buf.data(), buf.size(), late);
  CHECK(drive(t1, {&late}));
  CHECK(late.state == Completion::failed);
  CHECK(buf[0] == 0);
}

namespace {

// Runs one direct algorithm on n threads over real transports and checks every
// rank's output against a value computed here (i64 sums are exact).
void run_direct(int n, Collective c, const char* name, std::size_t count, int root,
                const std::map<std::string, std::string>& options = {}, int calls = 4) {
  auto g = make_group(n, options);
  const direct::DirectAlgorithm* a = direct::find_direct_algorithm(c, name);
  REQUIRE(a != nullptr);
  const auto nn = static_cast<std::size_t>(n);
  auto value = [](int r, std::size_t i, int call) { return static_cast<std::int64_t>(r * 1000 + i * 3 + call * 7); };
  on_ranks(n, [&](int r) {
    Transport& t = *g[static_cast<std::size_t>(r)];
    direct::DirectEngine e(t, *t.direct(), r, n);
    if (!e.eligible(*a, count, 8, root)) return;  // e.g. one-shot data larger than a window: alike on every rank
    std::size_t in_count = count, out_count = count;
    if (c == Collective::reduce_scatter) in_count = count * nn;
    if (c == Collective::allgather) out_count = count * nn;
    if (c == Collective::all_to_all) in_count = out_count = count * nn;
    for (int call = 0; call < calls; ++call) {  // back to back: slots reused without barriers
      std::vector<std::int64_t> in(in_count), out(out_count, -1);
      for (std::size_t i = 0; i < in_count; ++i) in[i] = value(r, i, call);
      direct::DirectRun run;
      run.input = in.data();
      run.output = c == Collective::broadcast ? static_cast<void*>(in.data()) : out.data();
      run.count = count;
      run.in_bytes = in_count * 8;
      run.out_bytes = out_count * 8;
      run.dtype = DataType::i64;
      run.root = root;
      run.deadline = Clock::now() + std::chrono::seconds(20);
      e.run(*a, run);
      for (std::size_t i = 0; i < out_count; ++i) {
        std::int64_t want = 0, got = c == Collective::broadcast ? in[i] : out[i];
        auto sum = [&](std::size_t j) {
          std::int64_t s = 0;
          for (int p = 0; p < n; ++p) s += value(p, j, call);
          return s;
        };
        if (c == Collective::allreduce) want = sum(i);
        if (c == Collective::reduce) want = r == root ? sum(i) : -1;
        if (c == Collective::reduce_scatter) want = sum(static_cast<std::size_t>(r) * count + i);
        if (c == Collective::allgather) want = value(static_cast<int>(i / count), i % count, call);
        if (c == Collective::broadcast) want = value(root, i, call);
        if (c == Collective::all_to_all)
          want = value(static_cast<int>(i / count), static_cast<std::size_t>(r) * count + i % count, call);
        if (got != want) {
          FAIL_CHECK(name << " " << to_string(c) << " n=" << n << " count=" << count << " rank " << r << " call "
                          << call << " element " << i << ": " << got << " != " << want);
          return;
        }
      }
    }
  });
}

}  // namespace

TEST_CASE("shm direct engine: every algorithm over real windows, small and chunked") {
  // A 1 MiB segment leaves windows of ~64-128 KiB: 40000 i64 elements are chunked.
  const std::map<std::string, std::string> small{{"shm.size", "2M"}};
  for (int n : {1, 2, 3}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{1000}, std::size_t{40000}}) {
      for (const auto& a : direct::all_direct_algorithms()) {
        if (a.collective == Collective::barrier) continue;
        run_direct(n, a.collective, std::string(a.name).c_str(), count, n - 1, small);
      }
    }
  }
}

TEST_CASE("shm direct engine: window data moves through each slot as a ring, results right across the wrap") {
  // Windows of a 2 MiB segment hold 8 KiB of data at a dozen or so offsets:
  // 40 calls wrap the ring of every algorithm at least once.
  const std::map<std::string, std::string> small{{"shm.size", "2M"}};
  for (int n : {2, 3})
    for (const auto& a : direct::all_direct_algorithms())
      if (a.collective != Collective::barrier)
        run_direct(n, a.collective, std::string(a.name).c_str(), 1000, n - 1, small, 40);

  // The data really moves: mem_oneshot calls of 8 KiB and 12 KiB in turn
  // (2 and 3 pages), each rank's input lands in its own slot seq % slots
  // right after the previous call's data there, back at the start where the
  // next call would pass the data region; 2 KiB calls travel in line flags
  // and 4 KiB ones stay put, and neither moves the ring.
  auto g = make_group(2, small);
  const DirectMemoryInfo info = g[0]->direct()->info();
  const std::size_t region = info.window_bytes >= direct::kLineRegionMinWindow ? kDirectLineRegionBytes : 0;
  const std::size_t data_end = info.window_bytes - region;
  const std::size_t sizes[] = {8192, 2048, 12288, 4096, 12288};  // an odd number: both slots see every size
  REQUIRE(data_end / (8192 + 12288) >= 3);
  const direct::DirectAlgorithm* oneshot = direct::find_direct_algorithm(Collective::allreduce, "mem_oneshot");
  std::vector<std::size_t> placed[2];
  on_ranks(2, [&](int r) {
    Transport& t = *g[static_cast<std::size_t>(r)];
    direct::DirectEngine e(t, *t.direct(), r, 2);
    std::vector<std::size_t> next(info.slots, 0);  // the ring, as the test expects it
    const std::uint64_t calls = 6 * data_end / 8192 * info.slots;
    for (std::uint64_t seq = 1; seq <= calls; ++seq) {
      const std::size_t bytes = sizes[seq % std::size(sizes)], count = bytes / 4;
      std::vector<float> in(count), out(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<float>(seq * 10000 + i * 2 + static_cast<std::size_t>(r));
      direct::DirectRun run;
      run.input = in.data();
      run.output = out.data();
      run.count = count;
      run.in_bytes = run.out_bytes = bytes;
      run.dtype = DataType::f32;
      run.deadline = Clock::now() + std::chrono::seconds(20);
      e.run(*oneshot, run);
      CHECK(out[count - 1] == static_cast<float>(2 * (seq * 10000 + (count - 1) * 2) + 1));
      if (bytes < 8192) continue;
      std::size_t& at = next[seq % info.slots];
      if (at + 64 + bytes > data_end) at = 0;
      const std::byte* slot = t.direct()->window(r, static_cast<unsigned>(seq % info.slots));
      CHECK(std::memcmp(slot + 64 + at, in.data(), bytes) == 0);
      placed[r].push_back(at);
      at += bytes;
    }
  });
  CHECK(placed[0] == placed[1]);
  CHECK(std::count(placed[0].begin(), placed[0].end(), std::size_t{0}) >= 4);  // it wrapped
}

TEST_CASE("shm direct waits end: abort, timeout naming the missing rank, a peer that left") {
  auto g = make_group(3);
  const direct::DirectAlgorithm* barrier = direct::find_direct_algorithm(Collective::barrier, "mem_direct");
  auto run_barrier = [&](int r, Clock::duration budget) {
    Transport& t = *g[static_cast<std::size_t>(r)];
    direct::DirectEngine e(t, *t.direct(), r, 3);
    direct::DirectRun run;
    run.deadline = Clock::now() + budget;
    e.run(*barrier, run);
  };
  // Rank 2 never comes: rank 0 times out naming it (and rank 1 too, which also stays away).
  try {
    run_barrier(0, std::chrono::milliseconds(300));
    FAIL("the barrier completed without ranks 1 and 2");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::timeout);
    CHECK(std::string(e.what()).find("waiting for ranks 1, 2, which have not arrived") != std::string::npos);
  }
  // abort() from another thread ends a wait within moments.
  auto g2 = make_group(2);
  std::atomic<bool> threw{false};
  const auto t0 = Clock::now();
  std::thread waiter([&] {
    Transport& t = *g2[0];
    direct::DirectEngine e(t, *t.direct(), 0, 2);
    direct::DirectRun run;
    run.deadline = Clock::now() + std::chrono::seconds(30);
    try {
      e.run(*barrier, run);
    } catch (const Error& e) {
      threw = e.code() == ErrorCode::aborted;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // asleep on its futex by now
  g2[0]->interrupt();
  waiter.join();
  CHECK(threw);
  CHECK(Clock::now() - t0 < std::chrono::seconds(5));
  // A peer that closes its transport while awaited fails the wait at once, naming it.
  auto g3 = make_group(2);
  std::thread leaver([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    g3[1].reset();
  });
  {
    Transport& t = *g3[0];
    direct::DirectEngine e(t, *t.direct(), 0, 2);
    direct::DirectRun run;
    run.deadline = Clock::now() + std::chrono::seconds(30);
    const auto start = Clock::now();
    CHECK_THROWS_WITH_AS(e.run(*barrier, run), doctest::Contains("rank 1 closed its communicator"), Error);
    CHECK(Clock::now() - start < std::chrono::seconds(5));
  }
  leaver.join();
}

namespace {

// One f32 sum all-reduce of `count` elements on every rank of `g` through
// mem_oneshot, rank `late` entering `delay` after the others; returns each
// rank's output (empty when its call threw; the error lands in `errors`).
std::vector<std::vector<float>> oneshot_f32(std::vector<std::unique_ptr<Transport>>& g, std::vector<std::size_t> counts,
                                            int call, std::vector<std::string>& errors, int late = -1,
                                            std::chrono::milliseconds delay = {}) {
  const int n = static_cast<int>(g.size());
  const direct::DirectAlgorithm* a = direct::find_direct_algorithm(Collective::allreduce, "mem_oneshot");
  std::vector<std::vector<float>> outs(g.size());
  errors.assign(g.size(), "");
  on_ranks(n, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    Transport& t = *g[ur];
    thread_local std::unique_ptr<direct::DirectEngine> engine;  // one per rank thread and group
    engine = std::make_unique<direct::DirectEngine>(t, *t.direct(), r, n);
    std::vector<float> in(counts[ur]), out(counts[ur], -1.0f);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = 1.0f / static_cast<float>(r + 3) + static_cast<float>(i % 13 + call);
    direct::DirectRun run;
    run.input = in.data();
    run.output = out.data();
    run.count = counts[ur];
    run.in_bytes = run.out_bytes = counts[ur] * 4;
    run.dtype = DataType::f32;
    run.deadline = Clock::now() + std::chrono::seconds(20);
    if (r == late) std::this_thread::sleep_for(delay);
    try {
      for (int k = 0; k < call; ++k) {  // calls before this one, matching
        std::vector<float> warm(counts[ur], 1.0f), sink(counts[ur]);
        direct::DirectRun w = run;
        w.input = warm.data();
        w.output = sink.data();
        engine->run(*a, w);
      }
      engine->run(*a, run);
      outs[ur] = out;
    } catch (const Error& e) {
      errors[ur] = e.what();
      if (out != std::vector<float>(counts[ur], -1.0f)) errors[ur] += " [OUTPUT CHANGED]";
    }
  });
  return outs;
}

}  // namespace

TEST_CASE("shm direct engine: a one-shot in line flags gives the program's bits, late peers, mismatch") {
  // Spinning 50 us: the peers' lines are read as they land; 0: every read
  // waits on the peer's flag first (as with more ranks than cores).
  for (const char* spin : {"50", "0"}) {
    for (int n : {2, 3, 4}) {
      // 11 elements: 44 B, one line; 14: one full line; 300: a partial last line; 518: the largest (2072 B).
      for (std::size_t count : {std::size_t{11}, std::size_t{14}, std::size_t{300}, std::size_t{518}}) {
        INFO("spin_us=" << spin << " n=" << n << " count=" << count);
        auto g = make_group(n, {{"shm.spin_us", spin}});
        std::vector<std::string> errors;
        const int late = n - 1;
        const auto outs = oneshot_f32(g, std::vector<std::size_t>(static_cast<std::size_t>(n), count), 2, errors,
                                      late, std::chrono::milliseconds(20));
        for (int r = 0; r < n; ++r) {
          REQUIRE(errors[static_cast<std::size_t>(r)] == "");
          for (std::size_t i = 0; i < count; ++i) {
            float want = 0;  // folded in rank order, as every direct algorithm does
            for (int p = 0; p < n; ++p) {
              const float v = 1.0f / static_cast<float>(p + 3) + static_cast<float>(i % 13 + 2);
              want = p == 0 ? v : want + v;
            }
            if (std::memcmp(&outs[static_cast<std::size_t>(r)][i], &want, 4) != 0) {
              FAIL_CHECK("rank " << r << " element " << i << ": " << outs[static_cast<std::size_t>(r)][i] << " != " << want);
              break;
            }
          }
        }
        // The lines really carried it: every rank's line region holds the last call's number in its call line
        // and as the tag of its first data line.
        const auto info = g[0]->direct()->info();
        for (int r = 0; r < n; ++r) {
          const std::byte* slot = g[0]->direct()->window(r, 3 % info.slots);
          const std::byte* region = slot + info.window_bytes - kDirectLineRegionBytes;
          std::uint64_t call = 0, tag = 0;
          std::memcpy(&call, region + kDirectCallOffset, 8);
          std::memcpy(&tag, region + kDirectLineBytes + kDirectLinePayload, 8);
          CHECK(call == 3);
          CHECK(tag == 3);
        }
      }
    }
  }
  // Ranks in calls of different sizes fail with mismatch, their outputs untouched.
  auto g = make_group(2);
  std::vector<std::string> errors;
  oneshot_f32(g, {300, 301}, 1, errors);
  for (const auto& e : errors) {
    CHECK(e.find("allreduce of 300 elements") != std::string::npos);
    CHECK(e.find("allreduce of 301 elements") != std::string::npos);
    CHECK(e.find("OUTPUT CHANGED") == std::string::npos);
  }
}
