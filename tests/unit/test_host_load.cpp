// Other work's share of the CPUs while calibration measured
// (select/host_load.hpp): the arithmetic on two samples, and the collective
// answer of ranks that are threads of one process.
#include "select/host_load.hpp"

#include <comm/store.hpp>

#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

using namespace comm;

namespace {

HostLoadSample sample(std::vector<std::uint64_t> busy, std::vector<std::uint64_t> total, double cpu_s = 0) {
  return {std::move(busy), std::move(total), cpu_s};
}

void spin_for(std::chrono::milliseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  std::atomic<unsigned> x{0};
  while (std::chrono::steady_clock::now() < end) x.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

TEST_CASE("others' share: busy jiffies of the group's CPUs less its own time, over their total") {
  const double tck = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const HostLoadSample before = sample({100, 100, 500}, {1000, 1000, 1000});
  const HostLoadSample after = sample({150, 190, 900}, {1100, 1100, 1400});
  // CPUs 0 and 1: 140 busy of 200 jiffies, of which own_s * tck were ours.
  CHECK(others_share(before, after, {0, 1}, 0.0) == doctest::Approx(140.0 / 200));
  CHECK(others_share(before, after, {0, 1}, 0.5) == doctest::Approx((140.0 - 0.5 * tck) / 200));
  // CPU 2 is not the group's: it does not count, however busy.
  CHECK(others_share(before, after, {1}, 0.0) == doctest::Approx(90.0 / 100));
  // More own time than busy jiffies (tick sampling): none of it was others'.
  CHECK(others_share(before, after, {0, 1}, 1000.0) == 0.0);
  // A CPU the samples do not know, or no jiffy at all: nothing to say, 0.
  CHECK(others_share(before, after, {7}, 0.0) == 0.0);
  CHECK(others_share(before, before, {0, 1, 2}, 0.0) == 0.0);
}

TEST_CASE("a sample of this machine: every CPU has busy <= total, and this process's time grows as it spins") {
  const HostLoadSample a = sample_host_load();
  REQUIRE_FALSE(a.busy.empty());
  REQUIRE(a.busy.size() == a.total.size());
  for (std::size_t c = 0; c < a.busy.size(); ++c) CHECK(a.busy[c] <= a.total[c]);
  spin_for(std::chrono::milliseconds(200));
  const HostLoadSample b = sample_host_load();
  CHECK(b.process_cpu_s - a.process_cpu_s > 0.05);
  std::vector<int> all;
  for (std::size_t c = 0; c < b.busy.size(); ++c) all.push_back(static_cast<int>(c));
  // Counted as nobody's, the spin shows up as other work; counted as ours, most of it does not.
  const double as_others = others_share(a, b, all, 0.0);
  const double as_ours = others_share(a, b, all, b.process_cpu_s - a.process_cpu_s);
  CHECK(as_others > 0.0);
  CHECK(as_ours < as_others);
}

TEST_CASE("thread ranks of one process agree on one share, their process counted once") {
  constexpr int kRanks = 3;
  auto store = make_memory_store();
  std::vector<OthersLoad> got(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r)
    ranks.emplace_back([&, r] {
      const HostLoadSample before = sample_host_load();
      spin_for(std::chrono::milliseconds(150));
      got[static_cast<std::size_t>(r)] = others_load_since(before, *store, r, kRanks, std::chrono::seconds(30));
    });
  for (auto& t : ranks) t.join();
  for (const OthersLoad& g : got) {
    CHECK(g.share == got[0].share);
    CHECK(g.where == got[0].where);
    CHECK(g.share >= 0.0);
    CHECK(g.share <= 1.0);
  }
  CHECK(got[0].where.find("of rank 0's host") != std::string::npos);
  CHECK(got[0].where.rfind("CPUs ", 0) == 0);
}
