// Hierarchical algorithms and the byte counters through the real
// Communicator over `local`, with ranks posing as several hosts (the peer
// table's test override): values against references computed here, bitwise
// equality with the flat algorithms where the reduction order cannot matter
// (exact data), identical bits on every rank where it can (random floats),
// and the bytes each rank sent across hosts.

#include "core/peer_table.hpp"
#include "local_group.hpp"
#include "tests/mp/suite_values.hpp"

#include <comm/comm.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <vector>

using namespace comm;
using suite::Buffer;

namespace {

// Ranks pose as hosts: host_of[rank] names the host of each rank.
class FakeHosts {
 public:
  explicit FakeHosts(std::vector<int> host_of) : host_of_(std::move(host_of)) {
    detail::set_host_override_for_tests([h = host_of_](const Config& c) {
      return "fake-host-" + std::to_string(h.at(static_cast<std::size_t>(c.rank)));
    });
  }
  ~FakeHosts() { detail::set_host_override_for_tests(nullptr); }
  FakeHosts(const FakeHosts&) = delete;
  FakeHosts& operator=(const FakeHosts&) = delete;
  int size() const { return static_cast<int>(host_of_.size()); }
  std::string str() const {
    std::string s;
    for (int h : host_of_) s += std::to_string(h);
    return s;
  }

 private:
  std::vector<int> host_of_;
};

// Runs `body` on the ranks of `hosts` over `local` (named: ranks that look
// like several hosts would otherwise get a network transport).
void run_on(const FakeHosts& hosts, const std::function<void(Communicator&)>& body, std::size_t chunk = 64) {
  Config cfg;
  cfg.transport = "local";
  cfg.chunk_bytes = chunk;  // many chunks: every pipelined path runs
  test::run_local(hosts.size(), cfg, body);
}

const std::vector<std::vector<int>> kLayouts = {
    {0, 0, 1, 1},        // 2 x 2
    {0, 0, 0, 1},        // 3 + 1
    {0, 0, 1, 2},        // 2, 1, 1
    {0, 1, 0, 1, 0, 1},  // interleaved: rank numbering does not follow hosts
    {0, 0, 0, 1, 1, 1, 1, 2},
};

struct Run {
  std::vector<unsigned char> bits;  // this rank's result
};

// One collective under `algo` with suite data; returns "" or what is wrong,
// and the raw result bytes in *bits.
std::string run_one(Communicator& c, Collective coll, const std::string& algo, DataType t, ReduceOp op,
                    std::size_t count, int root, std::vector<unsigned char>* bits) {
  const int n = c.size(), r = c.rank();
  CallOptions o;
  o.algorithm = algo;
  const auto val = [&](int q, std::size_t i) { return suite::input_value(q, i, t, op); };
  std::size_t in_n = count, out_n = count;
  if (coll == Collective::reduce_scatter) in_n = count * static_cast<std::size_t>(n);
  if (coll == Collective::allgather) out_n = count * static_cast<std::size_t>(n);
  Buffer in(t, in_n), out(t, out_n);
  for (std::size_t i = 0; i < in_n; ++i) in.set(i, val(r, i));
  ConstView vin{in.data(), in_n, t};
  View vout{out.data(), out_n, t};
  std::function<double(std::size_t)> want;
  switch (coll) {
    case Collective::allreduce:
      c.allreduce(vin, vout, op, o);
      want = [&](std::size_t i) { return suite::expected_reduction(n, i, t, op); };
      break;
    case Collective::reduce_scatter:
      c.reduce_scatter(vin, vout, op, o);
      want = [&](std::size_t i) { return suite::expected_reduction(n, static_cast<std::size_t>(r) * count + i, t, op); };
      break;
    case Collective::allgather:
      c.allgather(vin, vout, o);
      want = [&](std::size_t i) { return val(static_cast<int>(i / count), i % count); };
      break;
    case Collective::broadcast:
      if (r != root)
        for (std::size_t i = 0; i < count; ++i) in.set(i, 99);
      c.broadcast(View{in.data(), count, t}, root, o);
      out = in;
      want = [&](std::size_t i) { return val(root, i); };
      break;
    case Collective::reduce:
      c.reduce(vin, vout, op, root, o);
      if (r != root) return "";
      want = [&](std::size_t i) { return suite::expected_reduction(n, i, t, op); };
      break;
    case Collective::all_to_all:
    case Collective::all_to_allv:
    case Collective::barrier:
    case Collective::send:
    case Collective::recv: return "not a collective of this test";
  }
  for (std::size_t i = 0; i < out_n; ++i)
    if (!suite::close_enough(t, out.get(i), want(i)))
      return "element " + std::to_string(i) + " is " + std::to_string(out.get(i)) + ", expected " +
             std::to_string(want(i));
  const auto* p = static_cast<const unsigned char*>(out.data());
  bits->assign(p, p + out_n * dtype_size(t));
  return "";
}

// The flat algorithm each hierarchical one is compared with bit for bit.
const char* flat_of(Collective c) { return c == Collective::broadcast || c == Collective::reduce ? "tree" : "direct"; }

}  // namespace

TEST_CASE("hierarchy: the peer table's host override makes threads several hosts") {
  FakeHosts hosts({0, 1, 0, 1});
  run_on(hosts, [](Communicator& c) {
    const PeerTable& t = c.peers();
    REQUIRE(t.num_hosts() == 2);
    CHECK(t.hosts[0] == std::vector<int>{0, 2});
    CHECK(t.hosts[1] == std::vector<int>{1, 3});
    CHECK(c.transport_name() == "local");
  });
}

TEST_CASE("hierarchy: every hierarchical algorithm on even, uneven and interleaved hosts") {
  const Collective colls[] = {Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
                              Collective::broadcast, Collective::reduce};
  for (const auto& layout : kLayouts) {
    FakeHosts hosts(layout);
    INFO("hosts of ranks ", hosts.str());
    std::vector<std::string> failures;
    std::mutex mu;
    int runs = 0;
    run_on(hosts, [&](Communicator& c) {
      auto fail = [&](const std::string& what) {
        std::lock_guard lk(mu);
        failures.push_back("rank " + std::to_string(c.rank()) + ": " + what);
      };
      for (Collective coll : colls)
        for (const std::string& algo : c.algorithms(coll)) {
          if (algo.find("hierarchical") == std::string::npos) continue;
          for (DataType t : {DataType::f32, DataType::i32, DataType::bf16})
            for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::prod, ReduceOp::avg})
              for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1001}})
                for (int root : {0, c.size() - 1}) {
                  if (root && coll != Collective::broadcast && coll != Collective::reduce) continue;
                  const std::string what = std::string(to_string(coll)) + "/" + algo + " " +
                                           std::string(to_string(t)) + " " + std::string(to_string(op)) +
                                           " n=" + std::to_string(count) + " root=" + std::to_string(root);
                  std::vector<unsigned char> got, flat;
                  if (auto e = run_one(c, coll, algo, t, op, count, root, &got); !e.empty()) fail(what + ": " + e);
                  // Exact data: any reduction order gives the same bits as the flat algorithm.
                  if (auto e = run_one(c, coll, flat_of(coll), t, op, count, root, &flat); !e.empty())
                    fail(what + " (flat reference): " + e);
                  if (got != flat) fail(what + ": bits differ from " + flat_of(coll));
                  if (c.rank() == 0) ++runs;
                }
        }
    });
    for (const auto& f : failures) FAIL_CHECK(f);
    CHECK(failures.empty());
    CHECK(runs == 6 * 3 * 4 * 4 + 2 * 3 * 4 * 4);  // 6 (algorithm, collective) pairs, roots for two
  }
}

TEST_CASE("hierarchy: random floats reduce to the same bits on every rank, close to the exact sum") {
  FakeHosts hosts({0, 0, 0, 1, 1, 2});
  const std::size_t count = 4099;
  std::vector<std::vector<float>> results(6);
  for (const char* algo : {"hierarchical", "hierarchical_rail"}) {
    INFO(algo);
    run_on(hosts, [&](Communicator& c) {
      std::mt19937 rng(static_cast<unsigned>(c.rank() + 1));
      std::vector<float> x(count);
      for (auto& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
      CallOptions o;
      o.algorithm = algo;
      c.allreduce(view(x), ReduceOp::sum, o);  // in place
      results[static_cast<std::size_t>(c.rank())] = x;
    });
    std::vector<double> exact(count, 0.0);
    for (int r = 0; r < 6; ++r) {
      std::mt19937 rng(static_cast<unsigned>(r + 1));
      for (std::size_t i = 0; i < count; ++i) exact[i] += std::uniform_real_distribution<float>(-1, 1)(rng);
    }
    for (int r = 1; r < 6; ++r)
      CHECK(std::memcmp(results[static_cast<std::size_t>(r)].data(), results[0].data(), count * sizeof(float)) == 0);
    double worst = 0;
    for (std::size_t i = 0; i < count; ++i) worst = std::max(worst, std::abs(results[0][i] - exact[i]));
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("byte counters: what each rank sent to each peer, and how much crossed hosts") {
  FakeHosts hosts({0, 0, 1, 1});
  const std::size_t count = 1 << 14;  // S = 64 KiB of f32
  const double S = static_cast<double>(count * sizeof(float));
  run_on(hosts, [&](Communicator& c) {
    const int n = c.size(), r = c.rank();
    std::vector<float> x(count, 1.0f), y(count);
    auto cross_and_total = [&](const std::vector<std::uint64_t>& before) {
      const auto after = c.bytes_sent();
      REQUIRE(after.size() == static_cast<std::size_t>(n));
      std::uint64_t cross = 0, total = 0;
      for (int p = 0; p < n; ++p) {
        const std::uint64_t d = after[static_cast<std::size_t>(p)] - before[static_cast<std::size_t>(p)];
        total += d;
        if (!c.peers().same_host(r, p)) cross += d;
      }
      return std::pair<double, double>{static_cast<double>(cross), static_cast<double>(total)};
    };
    CallOptions o;
    // direct: the whole buffer to every other rank.
    o.algorithm = "direct";
    auto before = c.bytes_sent();
    c.allreduce(view(x), view(y), ReduceOp::sum, o);
    const auto after = c.bytes_sent();
    for (int p = 0; p < n; ++p)
      CHECK(after[static_cast<std::size_t>(p)] - before[static_cast<std::size_t>(p)] ==
            (p == r ? 0u : count * sizeof(float)));
    // send: exactly the message, to that peer only.
    before = c.bytes_sent();
    if (r == 0) c.send(ConstView{x.data(), 100, DataType::f32}, 3);
    if (r == 3) c.recv(View{y.data(), 100, DataType::f32}, 0);
    CHECK(cross_and_total(before).second == (r == 0 ? 400.0 : 0.0));
    // Flat ring: 2(n-1)/n S per rank, and the two ranks at host boundaries send all of it across.
    o.algorithm = "ring";
    before = c.bytes_sent();
    c.allreduce(view(x), view(y), ReduceOp::sum, o);
    const auto [ring_cross, ring_total] = cross_and_total(before);
    CHECK(ring_total == doctest::Approx(2.0 * (n - 1) / n * S));
    std::vector<double> ring_max{ring_cross};
    c.allreduce(view(ring_max), ReduceOp::max);
    CHECK(ring_max[0] == doctest::Approx(2.0 * (n - 1) / n * S));
    // Split rail: each rank sends S (hosts-1)/hosts across, to its rail peer only.
    o.algorithm = "hierarchical_rail";
    before = c.bytes_sent();
    c.allreduce(view(x), view(y), ReduceOp::sum, o);
    const auto [rail_cross, rail_total] = cross_and_total(before);
    CHECK(rail_cross <= S * (2 - 1) / 2 + 64);
    CHECK(rail_cross >= S * (2 - 1) / 2 - 64);
    CHECK(rail_total == ring_total);  // both move 2(n-1)/n S in all; the rail moves less of it across
    const auto rail_peer = (r + 2) % 4;
    const auto sent = c.bytes_sent();
    CHECK(sent[static_cast<std::size_t>(rail_peer ^ 1)] - before[static_cast<std::size_t>(rail_peer ^ 1)] == 0u);
    CHECK(y[0] == 4.0f);
  });
}

TEST_CASE("node-aware ring: ranks interleaved across hosts cross between them only twice") {
  FakeHosts hosts({0, 1, 0, 1, 0, 1});
  const std::size_t count = 6000;
  std::vector<double> crossing(6);
  run_on(hosts, [&](Communicator& c) {
    std::vector<float> x(count, 2.0f);
    CallOptions o;
    o.algorithm = "ring";
    const auto before = c.bytes_sent();
    c.allreduce(view(x), ReduceOp::sum, o);
    const auto after = c.bytes_sent();
    int peers_sent_to = 0;
    double cross = 0;
    for (int p = 0; p < c.size(); ++p) {
      const auto d = after[static_cast<std::size_t>(p)] - before[static_cast<std::size_t>(p)];
      peers_sent_to += d > 0;
      if (!c.peers().same_host(c.rank(), p)) cross += static_cast<double>(d);
    }
    CHECK(peers_sent_to == 1);  // a ring: one successor
    crossing[static_cast<std::size_t>(c.rank())] = cross;
    CHECK(x[0] == 12.0f);
  });
  // Ring 0 2 4 | 1 3 5: only 4 -> 1 and 5 -> 0 cross.
  const int crossers = static_cast<int>(std::count_if(crossing.begin(), crossing.end(), [](double b) { return b > 0; }));
  CHECK(crossers == 2);
  CHECK(crossing[4] > 0);
  CHECK(crossing[5] > 0);
}

namespace {

double allreduce_us(const FabricPreset& f, const char* algo, std::size_t bytes) {
  for (const Prediction& p : predict(Collective::allreduce, f.fabric, bytes, f.compute))
    if (p.algorithm == algo) return p.us;
  FAIL("no prediction for ", algo);
  return -1;
}

// Within 30 % of the published range [lo, hi].
bool near(double model, double lo, double hi) { return model >= 0.7 * lo && model <= 1.3 * hi; }

}  // namespace

TEST_CASE("fabric presets: the cost model reproduces published H100 figures within 30 %") {
  const FabricPreset one = fabric_preset("h100-8");
  CHECK(one.fabric.hosts == 1);
  CHECK(one.fabric.ranks_per_host == 8);
  // NCCL on 8 x H100 NVSwitch: ~15-20 us up to 64 KiB.
  for (std::size_t b : {std::size_t{8} << 10, std::size_t{64} << 10}) CHECK(near(allreduce_us(one, "ring", b), 15, 20));
  // One-shot kernels: 6-10 us at 8-256 KiB.
  for (std::size_t b : {std::size_t{8} << 10, std::size_t{256} << 10}) CHECK(near(allreduce_us(one, "direct", b), 6, 10));
  // NCCL ring bus bandwidth at 1 GiB: 360-475 GB/s.
  const double gib = static_cast<double>(std::size_t{1} << 30);
  CHECK(near(2.0 * 7 / 8 * gib / (allreduce_us(one, "ring", std::size_t{1} << 30) * 1e3), 360, 475));
  // 2 x 8 over NDR: 45-49 GB/s of bus bandwidth per NIC, with the fastest algorithm.
  const FabricPreset two = fabric_preset("h100-2x8");
  const Prediction fastest = predict(Collective::allreduce, two.fabric, std::size_t{1} << 30, two.compute).front();
  CHECK(fastest.algorithm == "hierarchical_rail");
  CHECK(near(2.0 * 15 / 16 * gib / (fastest.us * 1e3) / 8, 45, 49));
  // Nothing is predicted below the fastest published kernel's floor.
  CHECK(predict(Collective::allreduce, one.fabric, 128 << 10, one.compute).front().us > 0.7 * 6);
  CHECK(fabric_preset("h100-8x8").fabric.hosts == 8);
  CHECK_THROWS_WITH_AS(fabric_preset("h100-0x8"), doctest::Contains("presets: h100-8"), Error);
}

TEST_CASE("fabric presets: on hosts of 8 the selector picks hierarchical where it beats the flat ring") {
  for (const char* name : {"h100-2x8", "h100-8x8"}) {
    INFO(name);
    const FabricPreset f = fabric_preset(name);
    for (std::size_t b = 8 << 10; b <= (std::size_t{1} << 30); b *= 8) {
      const auto all = predict(Collective::allreduce, f.fabric, b, f.compute);
      const double ring = allreduce_us(f, "ring", b);
      const double hier = std::min(allreduce_us(f, "hierarchical", b), allreduce_us(f, "hierarchical_rail", b));
      CHECK(all.front().us <= std::min(ring, hier));  // sorted: what the selector chooses
      if (b >= (std::size_t{1} << 20)) CHECK(hier < ring);  // bandwidth: the rails win by far
    }
    // Uniform links (one host): the hierarchical algorithms are the flat ones and never win.
    const FabricPreset one = fabric_preset("h100-8");
    CHECK(allreduce_us(one, "hierarchical_rail", 1 << 20) == doctest::Approx(allreduce_us(one, "ring", 1 << 20)));
  }
}
