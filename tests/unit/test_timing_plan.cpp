// Which algorithms start-up calibration times at each size (select/timing_plan.hpp).

#include "select/timing_plan.hpp"
#include "select_fixtures.hpp"
#include "util/carryover_order.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

using namespace comm;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Two hosts of two ranks as the emulated hosts measured them: shared memory
// inside, a slow TCP network between (a round of every algorithm at 1 MiB
// exceeds the size's budget, so only those within 2x of the best are timed).
LinkMatrix two_by_two() {
  LinkMatrix m = test::uniform_links(4, LinkKind::tcp, 63.0, 0.63);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) {
      LinkInfo& l = m.links[static_cast<std::size_t>(a) * 4 + b];
      if (a != b && a / 2 == b / 2) l = {LinkKind::shm, 3.2, 3.7, "shm"};
      if (a / 2 != b / 2) l.rndv_threshold_bytes = 16384, l.rndv_extra_us = 62;
      l.receiver_copies = a != b;
    }
  return m;
}

struct Plan {
  Selector s{4,      two_by_two(), ComputeParams{}, kMiB, {}, nullptr, true, nullptr,
             algo::HostGroups::of({{0, 1}, {2, 3}}, 4)};
  std::vector<std::string> names = s.names(Collective::allreduce);
  NativeProfile so_far;
  double model(const std::string& a, std::size_t bytes) const { return s.predict_model(Collective::allreduce, a, bytes); }
  // `a` took `ratio` x its model at `bytes`.
  void measured(const std::string& a, std::size_t bytes, double ratio) {
    const NativeCurve* had = so_far.find(Collective::allreduce, a);
    std::vector<std::pair<std::size_t, double>> curve = had ? had->points : decltype(curve){};
    curve.emplace_back(bytes, ratio * model(a, bytes));
    so_far.set(Collective::allreduce, a, curve);
  }
  std::vector<std::string> timed_at(std::size_t bytes) const {
    std::vector<std::string> out;
    for (const std::size_t i : worth_timing(s, names, bytes, so_far).indices) out.push_back(names[i]);
    return out;
  }
  bool times(std::size_t bytes, const std::string& a) const {
    const auto t = timed_at(bytes);
    return std::find(t.begin(), t.end(), a) != t.end();
  }
};

}  // namespace

TEST_CASE("timing plan: an algorithm the bare model calls hopeless is timed when the size before says otherwise") {
  // As on 2 x 2 emulated hosts: the algorithm the bare model likes best at 1
  // MiB measured 3x its model at 64 KiB, every other one as modelled. The
  // bare model alone would drop those more than 2x behind it at 1 MiB.
  Plan p;
  std::string favourite;
  double best_bare = std::numeric_limits<double>::infinity();
  for (const auto& a : p.names)
    if (const double m = p.model(a, kMiB); m < best_bare) best_bare = m, favourite = a;
  for (const auto& a : p.names) p.measured(a, 64 << 10, a == favourite ? 3.0 : 1.0);
  double best_estimate = std::numeric_limits<double>::infinity();
  for (const auto& a : p.names) best_estimate = std::min(best_estimate, p.model(a, kMiB) * (a == favourite ? 3.0 : 1.0));
  int rescued = 0;
  for (const auto& a : p.names) {
    INFO(a << ": bare " << p.model(a, kMiB) << " us, best bare " << best_bare << ", best estimate " << best_estimate);
    const bool within_estimate = p.model(a, kMiB) <= 2 * best_estimate;
    CHECK(p.times(kMiB, a) == (within_estimate || p.model(a, kMiB) <= 2 * best_bare));
    if (within_estimate && p.model(a, kMiB) > 2 * best_bare) ++rescued;
  }
  REQUIRE(rescued > 0);  // the case discriminates: some algorithm only the measured ratio keeps
}

TEST_CASE("timing plan: an algorithm that measured far faster than its model does not crowd out the others") {
  // The bare model's own choice still holds: whatever is close to the best
  // bare model is timed although one algorithm's estimate is far ahead.
  Plan p;
  for (const auto& a : p.names) p.measured(a, 64 << 10, a == p.names.front() ? 0.01 : 1.0);
  double best_bare = std::numeric_limits<double>::infinity();
  for (const auto& a : p.names) best_bare = std::min(best_bare, p.model(a, kMiB));
  for (const auto& a : p.names) {
    INFO(a);
    if (p.model(a, kMiB) <= 2 * best_bare) CHECK(p.times(kMiB, a));
  }
  CHECK(p.times(kMiB, p.names.front()));
}

TEST_CASE("timing plan: the largest size times a few contenders measured at the size before") {
  Plan p;
  // Only three algorithms were timed at 1 MiB; the rest stopped earlier.
  const std::vector<std::string> at_1m{p.names[0], p.names[1], p.names[2]};
  for (const auto& a : p.names) p.measured(a, 64 << 10, 1.0);
  for (const auto& a : at_1m) p.measured(a, kMiB, 1.0);
  const auto timed = p.timed_at(kContendersFrom);
  CHECK(timed.size() <= 4);
  for (const auto& a : timed) {
    INFO(a);
    CHECK(std::find(at_1m.begin(), at_1m.end(), a) != at_1m.end());
  }
  // A contender that measured far faster than its model at 1 MiB is timed.
  Plan q;
  for (const auto& a : q.names) q.measured(a, kMiB, a == q.names.back() ? 0.05 : 1.0);
  CHECK(q.times(kContendersFrom, q.names.back()));
  // Nothing measured at the size before: nothing to compare, nothing timed.
  Plan none;
  CHECK(none.timed_at(kContendersFrom).empty());
}

TEST_CASE("timing plan: the largest size's contender slots go to one of each way of moving the data first") {
  // 2 ranks over TCP, as loopback measured it: at 1 MiB every algorithm took
  // 0.9x its model except those of the family slowest there by the model
  // (tree's: the whole message up and back, unpipelined in one chunk), which
  // took 1.0x. Sorted by promise alone, the half-exchangers (ring, twoshot,
  // rabenseifner, hierarchical_rail) fill the slots.
  Selector s{2, test::uniform_links(2, LinkKind::tcp, 10.0, 2.66), ComputeParams{}, kMiB, {}, nullptr, true};
  const std::vector<std::string> names = s.names(Collective::allreduce);
  // An algorithm's family: its bare model at 1 MiB and at the largest size.
  const auto family = [&](const std::string& a) {
    return std::pair{s.predict_model(Collective::allreduce, a, kMiB),
                     s.predict_model(Collective::allreduce, a, kContendersFrom)};
  };
  const auto same = [](double x, double y) { return std::max(x, y) <= Selector::kSameMovement * std::min(x, y); };
  const auto alike = [&](std::pair<double, double> x, std::pair<double, double> y) {
    return same(x.first, y.first) && same(x.second, y.second);
  };
  std::string slowest = names.front();
  for (const auto& a : names)
    if (family(a).first > family(slowest).first) slowest = a;
  NativeProfile so_far;
  for (const auto& a : names)
    so_far.set(Collective::allreduce, a, {{kMiB, (alike(family(a), family(slowest)) ? 1.0 : 0.9) * family(a).first}});
  const TimingCandidates c = worth_timing(s, names, kContendersFrom, so_far);
  std::vector<std::pair<double, double>> timed;
  for (const std::size_t i : c.indices) {
    INFO(names[i] << ": bare " << family(names[i]).first << " us at 1 MiB, " << family(names[i]).second
                  << " us at the largest size");
    CHECK(std::none_of(timed.begin(), timed.end(), [&](auto f) { return alike(f, family(names[i])); }));
    timed.push_back(family(names[i]));
  }
  CHECK(c.indices.size() == 4);
  INFO("the slowest at 1 MiB: " << slowest);
  CHECK(std::any_of(timed.begin(), timed.end(), [&](auto f) { return alike(f, family(slowest)); }));
}

TEST_CASE("timing plan: at 8 MiB the slots go to ways of moving the data apart at the last size too") {
  // 2 ranks over fast shared memory, whose receiver copies the data (the
  // model then calls ring and twoshot equally fast). At 8 MiB ring's chunks
  // (8 messages) count as twoshot's halves (2), at the last size (32) they
  // do not. At 1 MiB twoshot's family measured as modelled, ring's (ring,
  // hierarchical_rail) at 1.2x, tree's and direct's at 0.8x (all four within
  // reach). Ranked by promise alone (the bare model counts too, and calls
  // ring and twoshot equally fast), the fourth slot went to
  // hierarchical_rail, ring's twin on 2 ranks, and twoshot's family had none.
  LinkMatrix links = test::uniform_links(2, LinkKind::shm, 1.0, 20.0);
  links.links[1].receiver_copies = links.links[2].receiver_copies = true;
  Selector s{2, links, ComputeParams{}, kMiB, {}, nullptr, true};
  const std::vector<std::string> names = s.names(Collective::allreduce);
  const auto near = [&](const std::string& a) {
    return s.movement(Collective::allreduce, a, {kContendersFrom, kMiB});
  };
  const auto far = [&](const std::string& a) {
    return s.movement(Collective::allreduce, a, {kContendersFrom, kMiB, kLargestTimed});
  };
  REQUIRE(Selector::moves_alike(near("ring"), near("twoshot")));
  REQUIRE_FALSE(Selector::moves_alike(far("ring"), far("twoshot")));
  NativeProfile so_far;
  for (const auto& a : names)
    so_far.set(Collective::allreduce, a,
               {{kMiB, (Selector::moves_alike(far(a), far("ring"))      ? 1.2
                        : Selector::moves_alike(far(a), far("twoshot")) ? 1.0
                                                                        : 0.8) *
                           s.predict_model(Collective::allreduce, a, kMiB)}});
  const TimingCandidates c = worth_timing(s, names, kContendersFrom, so_far);
  std::vector<Selector::Movement> timed;
  for (const std::size_t i : c.indices) {
    INFO(names[i]);
    const auto alike = [&](const Selector::Movement& m) { return Selector::moves_alike(m, far(names[i])); };
    CHECK(std::none_of(timed.begin(), timed.end(), alike));
    timed.push_back(far(names[i]));
  }
  CHECK(c.indices.size() == 4);
  for (const char* way : {"ring", "twoshot"}) {
    INFO(way);
    CHECK(std::any_of(timed.begin(), timed.end(), [&](const auto& m) { return Selector::moves_alike(m, far(way)); }));
  }
}

TEST_CASE("timing plan: where the fastest changes between two timed sizes, the size halfway is timed") {
  // Every algorithm measured as modelled at 4 KiB and 64 KiB, except that the
  // one fastest at 4 KiB by the model is made the slowest at 64 KiB and a
  // second one far the fastest there: the fastest changes between them.
  Plan p;
  constexpr std::size_t lo = 4096, hi = 64 << 10;
  auto fastest_model = [&](std::size_t bytes) {
    std::string f;
    double best = std::numeric_limits<double>::infinity();
    for (const auto& a : p.names)
      if (const double m = p.model(a, bytes); m >= 0 && m < best) best = m, f = a;
    return f;
  };
  const std::string at_lo = fastest_model(lo);
  const std::string at_hi = at_lo == p.names.front() ? p.names.back() : p.names.front();
  for (const auto& a : p.names) {
    p.measured(a, lo, 1.0);
    p.measured(a, hi, a == at_lo ? 10.0 : a == at_hi ? 0.01 : 1.0);
  }
  p.s.set_measured_profile(p.so_far);
  auto index = [&](const std::string& a) { return static_cast<std::size_t>(std::find(p.names.begin(), p.names.end(), a) - p.names.begin()); };
  const Refinement r = refinement_between(p.s, p.names, lo, hi, p.so_far);
  CHECK(r.bytes == 16384);  // 2^((12 + 16) / 2)
  const auto& timed = r.candidates.indices;
  CHECK(std::find(timed.begin(), timed.end(), index(at_lo)) != timed.end());
  CHECK(std::find(timed.begin(), timed.end(), index(at_hi)) != timed.end());
  // Everything timed is what the corrected model puts close to the best there, or an end's fastest.
  double best = std::numeric_limits<double>::infinity();
  for (const auto& a : p.names)
    if (const double e = p.s.predict(Collective::allreduce, a, r.bytes); e >= 0) best = std::min(best, e);
  double round = 0;
  for (const std::size_t i : timed) {
    INFO(p.names[i]);
    const double e = p.s.predict(Collective::allreduce, p.names[i], r.bytes);
    round += e;
    if (p.names[i] != at_lo && p.names[i] != at_hi) CHECK(e <= kRefinementWithin * best);
  }
  CHECK(r.candidates.round_us() == doctest::Approx(round));
  // Uneven logs round down; neighbours closer than 4x have nothing between.
  CHECK(refinement_between(p.s, p.names, 8, lo, p.so_far).bytes == 128);  // 2^((3 + 12) / 2)
  CHECK(refinement_between(p.s, p.names, lo, 2 * lo, p.so_far).bytes == 0);

  // One algorithm fastest at both ends, and by the corrected model between: nothing to place.
  Plan q;
  const std::string f = fastest_model(lo);
  for (const auto& a : q.names) {
    q.measured(a, lo, a == f ? 0.1 : 1.0);
    q.measured(a, hi, a == f ? 0.1 : 1.0);
  }
  q.s.set_measured_profile(q.so_far);
  CHECK(refinement_between(q.s, q.names, lo, hi, q.so_far).bytes == 0);
}

TEST_CASE("timing plan: an algorithm untimed at a size the corrected model now puts fastest there is timed there") {
  // Every algorithm measured as modelled at 4 KiB and 64 KiB; at 16 KiB only
  // the model's fastest was timed, in a slow spell (5x its model).
  constexpr std::size_t lo = 4096, mid = 16384, hi = 64 << 10;
  auto setup = [](Plan& p, double ratio_at_mid, bool time_all_at_mid) {
    std::string fastest;
    double best = std::numeric_limits<double>::infinity();
    for (const auto& a : p.names)
      if (const double m = p.model(a, mid); m >= 0 && m < best) best = m, fastest = a;
    for (const auto& a : p.names) {
      if (p.model(a, lo) < 0) continue;
      p.measured(a, lo, 1.0);
      p.measured(a, hi, 1.0);
      if (a == fastest || time_all_at_mid) p.measured(a, mid, a == fastest ? ratio_at_mid : 1.0);
    }
    p.s.set_measured_profile(p.so_far);
    return fastest;
  };
  auto index = [](const Plan& p, const std::string& a) {
    return static_cast<std::size_t>(std::find(p.names.begin(), p.names.end(), a) - p.names.begin());
  };
  Plan p;
  const std::string slow = setup(p, 5.0, false);
  const TimingCandidates c = challenger_at(p.s, p.names, mid, p.so_far);
  REQUIRE(c.indices.size() == 2);
  const std::string challenger = p.names[c.indices[0]];
  CHECK(challenger != slow);
  CHECK(c.indices[1] == index(p, slow));  // measured again beside it, in the same moment
  // The challenger is what auto would pick there now, on an interpolated prediction.
  for (const auto& a : p.names)
    if (const double e = p.s.predict(Collective::allreduce, a, mid); e >= 0)
      CHECK(p.s.predict(Collective::allreduce, challenger, mid) <= e);
  CHECK(c.round_us() == doctest::Approx(p.s.predict(Collective::allreduce, challenger, mid) +
                                      p.s.predict(Collective::allreduce, slow, mid)));

  Plan quiet;  // the one timed there stays the fastest: nothing to challenge
  setup(quiet, 1.0, false);
  CHECK(challenger_at(quiet.s, quiet.names, mid, quiet.so_far).indices.empty());
  Plan all;  // every algorithm timed there: the selector uses their own times
  setup(all, 5.0, true);
  CHECK(challenger_at(all.s, all.names, mid, all.so_far).indices.empty());
}

TEST_CASE("rounds in carryover-balanced order: every contender follows every other one equally often") {
  for (std::size_t n = 1; n <= 7; ++n) {
    CAPTURE(n);
    const std::size_t period = n % 2 == 0 ? n : 2 * n;
    std::vector<std::vector<int>> follows(n, std::vector<int>(n, 0));  // [before][after]
    std::vector<int> first(n, 0);
    for (std::size_t round = 0; round < period; ++round) {
      std::vector<std::size_t> order;
      for (std::size_t j = 0; j < n; ++j) order.push_back(util::carryover_order(n, round, j));
      std::vector<std::size_t> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      for (std::size_t j = 0; j < n; ++j) CHECK(sorted[j] == j);  // each round runs every contender once
      ++first[order[0]];
      for (std::size_t j = 1; j < n; ++j) ++follows[order[j - 1]][order[j]];
    }
    const int times = n % 2 == 0 ? 1 : 2;
    for (std::size_t a = 0; a < n; ++a) {
      CHECK(first[a] == times);  // and starts equally often
      for (std::size_t b = 0; b < n; ++b)
        if (a != b) CHECK(follows[a][b] == times);
    }
    CHECK(util::carryover_order(n, period + 1, 0) == util::carryover_order(n, 1, 0));  // periodic
  }
}

TEST_CASE("timing plan: the last size times three contenders of three ways of moving the data, where a round fits") {
  // Every algorithm measured at 8 MiB as modelled, except tree's family
  // (tree, hierarchical: the whole message up and back) and twoshot's
  // (twoshot, rabenseifner: halves sent whole) at 0.6x, which puts them
  // within reach of ring's (ring, hierarchical_rail: halves cut in chunks).
  // Over fast links the three slots at 32 MiB go to one of each way of moving
  // the data, not to ring and hierarchical_rail (the same on two ranks, and
  // the two most promising) nor to two alike. Over 2 GB/s TCP a round of
  // three takes more than the budget, and the least promising are left out
  // until a round fits; over 0.5 GB/s TCP not even one fits, and nothing is
  // timed there.
  const auto plan = [](LinkKind kind, double alpha_us, double gbps) {
    Selector s{2, test::uniform_links(2, kind, alpha_us, gbps), ComputeParams{}, kMiB, {}, nullptr, true};
    const std::vector<std::string> names = s.names(Collective::allreduce);
    const auto moves = [&](const std::string& a) {
      return s.movement(Collective::allreduce, a, {kLargestTimed, kContendersFrom});
    };
    NativeProfile so_far;
    for (const auto& a : names)
      so_far.set(Collective::allreduce, a,
                 {{kContendersFrom,
                   (Selector::moves_alike(moves(a), moves("tree")) || Selector::moves_alike(moves(a), moves("twoshot"))
                        ? 0.6
                        : 1.0) *
                       moves(a).us[1]}});
    // What each measured at 8 MiB, carried to 32 MiB by its model: the estimates worth_timing ranks by.
    std::vector<double> estimates;
    for (const auto& a : names)
      if (const auto m = moves(a); m.us[0] > 0 && m.us[1] > 0)
        estimates.push_back(so_far.find(Collective::allreduce, a)->points[0].second * m.us[0] / m.us[1]);
    std::sort(estimates.begin(), estimates.end());
    std::vector<Selector::Movement> timed;
    const TimingCandidates c = worth_timing(s, names, kLargestTimed, so_far);
    for (const std::size_t i : c.indices) timed.push_back(moves(names[i]));
    return std::tuple{timed, moves("tree"), moves("twoshot"), c, estimates};
  };
  const auto [fast, tree, twoshot, fast_c, fast_estimates] = plan(LinkKind::shm, 1.0, 20.0);
  REQUIRE(fast.size() == 3);
  for (std::size_t i = 0; i < fast.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) CHECK_FALSE(Selector::moves_alike(fast[i], fast[j]));
  CHECK(std::any_of(fast.begin(), fast.end(), [&](const auto& m) { return Selector::moves_alike(m, tree); }));
  CHECK(std::any_of(fast.begin(), fast.end(), [&](const auto& m) { return Selector::moves_alike(m, twoshot); }));
  CHECK(fast_c.round_us() <= kTimingBudgetPerSizeUs);
  CHECK(fast_c.warmup_rounds() == 0);  // each turn's untimed call warms it
  // Fewer over slower links: the most promising stays (each is timed only
  // within what is left of the calibration's budget: cap_past_caches).
  const auto [tcp, tcp_tree, tcp_twoshot, tcp_c, tcp_estimates] = plan(LinkKind::tcp, 10.0, 2.0);
  REQUIRE(!tcp.empty());
  REQUIRE(tcp.size() < 3);
  CHECK(tcp_c.us.front() == doctest::Approx(tcp_estimates.front()));
  CHECK(tcp_c.round_us() <= kTimingBudgetPerSizeUs);
  CHECK(std::get<0>(plan(LinkKind::tcp, 10.0, 0.5)).empty());
}

TEST_CASE("the timing of a size fits what is left of the calibration's budget: the most promising candidates first") {
  constexpr std::size_t cache = std::size_t{4} << 20;
  // The warm-up round costs one call per candidate; each timed round's turn
  // has untimed calls (two in cache, one past it) and two timed ones (one at
  // the last size): in cache 1 + 4 per round, past it 1 + 3, at the last size
  // 1 + 2. A barrier comes before every call a turn times (1 in the warm-up
  // round, 2 in each timed one, 1 at the last size) and every round starts
  // with the agreement on the budget.
  const TimingCost small{4096, cache, 2, 0.0};
  CHECK(small.per_candidate(10.0) == doctest::Approx(10.0 * (1 + 2 * 4)));
  CHECK(TimingCost{std::size_t{8} << 20, cache, 1, 0.0}.per_candidate(10.0) == doctest::Approx(10.0 * (1 + 3)));
  CHECK(TimingCost{kLargestTimed, cache, 1, 5.0}.per_candidate(10.0) == doctest::Approx(10.0 * (1 + 2) + 5.0 * 2));
  // A lone contender at the last size has no warm-up round: its turn's untimed call, its timed one.
  CHECK(TimingCost{kLargestTimed, cache, 1, 5.0, 0}.per_candidate(10.0) == doctest::Approx(10.0 * 2 + 5.0 * 1));
  CHECK(TimingCost{kLargestTimed, cache, 1, 5.0, 0}.per_size() == doctest::Approx(5.0 * 1));
  const TimingCost synced{4096, cache, 2, 5.0};
  CHECK(synced.per_candidate(10.0) == doctest::Approx(10.0 * (1 + 2 * 4) + 5.0 * (1 + 2 * 2)));
  CHECK(synced.per_size() == doctest::Approx(5.0 * 3));

  TimingCandidates c;
  c.add(4, 1.0);  // each costs 9 x its call at 4 KiB over two rounds
  c.add(1, 2.0);
  c.add(7, 4.0);
  TimingCandidates fits = c;
  fit_to_budget(fits, small, 9.0 * 3.0 + 1.0);  // the first two, not the third
  CHECK(fits.indices == std::vector<std::size_t>{4, 1});
  CHECK(fits.us == std::vector<double>{1.0, 2.0});
  CHECK(fits.round_us() == doctest::Approx(3.0));
  TimingCandidates all = c;
  fit_to_budget(all, small, 1e9);
  CHECK(all.indices == c.indices);
  CHECK(all.round_us() == doctest::Approx(7.0));
  TimingCandidates none = c;
  fit_to_budget(none, small, 8.0);  // not even the first
  CHECK(none.indices.empty());
  CHECK(none.us.empty());
  CHECK(none.round_us() == 0.0);
  TimingCandidates floor = c;
  fit_to_budget(floor, small, 8.0, 2);  // the first two whatever the budget, then what fits
  CHECK(floor.indices == std::vector<std::size_t>{4, 1});
  // The synchronisation counts: with 5 us barriers the size's agreements take
  // 15 and each candidate 25 more, so the budget that held two holds none,
  // and one holds with room for the first's barriers.
  TimingCandidates no_room = c;
  fit_to_budget(no_room, synced, 9.0 * 3.0 + 1.0);
  CHECK(no_room.indices.empty());
  TimingCandidates one = c;
  fit_to_budget(one, synced, 15.0 + (9.0 + 25.0) + 1.0);
  CHECK(one.indices == std::vector<std::size_t>{4});
  TimingCandidates two = c;
  fit_to_budget(two, synced, 15.0 + (9.0 + 25.0) + (18.0 + 25.0));
  CHECK(two.indices == std::vector<std::size_t>{4, 1});

  // Past the caches a rung is timed whole or not at all, as long as calibration stays under its cap.
  constexpr std::size_t big = std::size_t{8} << 20;
  const TimingCost past{big, cache, 1, 4.0};
  const double rung = past.of(c);  // 4 calls each (28) + 3 barriers each (36) + 2 agreements (8)
  CHECK(rung == doctest::Approx(28.0 + 36.0 + 8.0));
  TimingCandidates under = c;
  cap_past_caches(under, past, kCalibrationCapUs - rung - 1.0);
  CHECK(under.indices == c.indices);
  TimingCandidates over = c;
  cap_past_caches(over, past, kCalibrationCapUs - rung + 1.0);
  CHECK(over.indices.empty());
  CHECK(over.us.empty());
  // At the last size the contenders must also fit what is left of the
  // budget, the most promising first: each costs its untimed and its timed
  // call and a barrier (no warm-up round), the size one agreement.
  TimingCandidates last_three;
  last_three.add(3, 10.0);
  last_three.add(5, 12.0);
  last_three.add(6, 14.0);
  const TimingCost last{kLargestTimed, cache, 1, 1.0, 0};
  CHECK(last.of(last_three) == doctest::Approx(1.0 + (20.0 + 1.0) + (24.0 + 1.0) + (28.0 + 1.0)));
  TimingCandidates all_fit = last_three;
  cap_past_caches(all_fit, last, 0.0, 76.0);
  CHECK(all_fit.indices == last_three.indices);
  TimingCandidates two_fit = last_three;
  cap_past_caches(two_fit, last, 0.0, 75.0);
  CHECK(two_fit.indices == std::vector<std::size_t>{3, 5});
  TimingCandidates one_fits = last_three;
  cap_past_caches(one_fits, last, 0.0, 22.0);
  CHECK(one_fits.indices == std::vector<std::size_t>{3});
  TimingCandidates none_fits = last_three;
  cap_past_caches(none_fits, last, 0.0, 21.0);
  CHECK(none_fits.indices.empty());
  // Before the last size past the caches, the budget left does not trim a rung.
  TimingCandidates at_eight = last_three;
  cap_past_caches(at_eight, TimingCost{kContendersFrom, cache, 1, 1.0, 0}, 0.0, 1.0);
  CHECK(at_eight.indices == last_three.indices);

  // What timing algorithms may spend: the target less what calibration spent before, never below the floor.
  CHECK(algorithm_timing_budget_us(80000) == doctest::Approx(kCalibrationTargetUs - 80000));
  CHECK(algorithm_timing_budget_us(kCalibrationTargetUs) == doctest::Approx(kMinAlgorithmTimingUs));
}
