// Deterministic mode: the schedule property (select/determinism.hpp) proved
// by running every algorithm's schedules symbolically, the selector's
// restriction, and bitwise-identical all-reduce results for every qualifying
// algorithm, size bucket and chunking (local transport; tests/mp runs the
// same check over the real transports).
#include "local_group.hpp"
#include "tests/deterministic_values.hpp"
#include "select/determinism.hpp"
#include "select/selector.hpp"
#include "select_fixtures.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using namespace comm;

namespace {

constexpr int kWorlds[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16};

const algo::Algorithm& algorithm(Collective c, std::string_view name) {
  const algo::Algorithm* a = algo::find_algorithm(c, name);
  REQUIRE(a);
  return *a;
}

LinkMatrix shm_links(int n) { return test::uniform_links(n, LinkKind::shm, 0.7, 7, "shm"); }

}  // namespace

TEST_CASE("deterministic algorithms, proved from their schedules") {
  for (const int n : kWorlds) {
    CAPTURE(n);
    // One-shot and two-shot fold block by block in rank order at every size.
    CHECK(rank_ordered(algorithm(Collective::allreduce, "direct"), n));
    CHECK(rank_ordered(algorithm(Collective::allreduce, "twoshot"), n));
    CHECK(rank_ordered(algorithm(Collective::reduce_scatter, "direct"), n));
    CHECK(rank_ordered(algorithm(Collective::reduce, "direct"), n));
    // Nothing is reduced: data moves unchanged.
    for (const auto& a : algo::all_algorithms())
      if (!reduces(a.collective)) CHECK(rank_ordered(a, n));
  }
  // The ring starts each block's sum at a different rank.
  for (const int n : {2, 4, 9}) {
    std::string why;
    CHECK_FALSE(rank_ordered(algorithm(Collective::allreduce, "ring"), n, &why));
    CHECK(why.find("on " + std::to_string(n) + " ranks") == 0);
    CHECK(why.find(", not ") != std::string::npos);
    CHECK_FALSE(rank_ordered(algorithm(Collective::reduce_scatter, "ring"), n));
  }
  // Tree shapes group ranks in pairs once there are 4 or more.
  for (const char* name : {"tree", "recursive_doubling", "rabenseifner"}) {
    CAPTURE(name);
    CHECK(rank_ordered(algorithm(Collective::allreduce, name), 3));
    CHECK_FALSE(rank_ordered(algorithm(Collective::allreduce, name), 4));
    CHECK_FALSE(rank_ordered(algorithm(Collective::allreduce, name), 16));
  }
}

TEST_CASE("deterministic mode restricts selection, overrides and per-call names") {
  Selector s(4, shm_links(4), ComputeParams{}, std::size_t{1} << 20, {}, nullptr);
  s.set_deterministic(true);
  for (const auto& r : s.table(Collective::allreduce, std::size_t{1} << 30)) {
    CAPTURE(r.min_bytes);
    CHECK(s.deterministic(Collective::allreduce, r.algorithm));
  }
  CHECK_NOTHROW(s.check_deterministic(Collective::allreduce, "twoshot"));
  try {
    s.check_deterministic(Collective::allreduce, "ring");
    FAIL("ring was allowed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).find("deterministic algorithms here: direct, twoshot") != std::string::npos);
  }
  for (const auto& c : s.candidates(Collective::allreduce, 1 << 20))
    CHECK(c.deterministic == (c.algorithm == "direct" || c.algorithm == "twoshot"));

  Selector with_rule(4, shm_links(4), ComputeParams{}, std::size_t{1} << 20, parse_override("allreduce=ring:64K-"),
                     nullptr);
  try {
    with_rule.set_deterministic(true);
    FAIL("an override naming ring was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_config);
    CHECK(std::string(e.what()).find("COMM_ALGO names 'ring'") != std::string::npos);
  }

  Config cfg;
  cfg.deterministic = true;
  test::run_local(4, cfg, [](Communicator& c) {
    std::vector<float> x(8, 1.0f);
    CallOptions ring;
    ring.algorithm = "ring";
    CHECK_THROWS_AS(c.allreduce(view(x), ReduceOp::sum, ring), Error);
    CHECK_FALSE(c.failed());  // a usage error: nothing was sent
    c.allreduce(view(x), ReduceOp::sum);
    CHECK(x[0] == 4.0f);
  });
}

TEST_CASE("deterministic mode: bitwise-identical all-reduce at every size bucket, algorithm and chunking") {
  const std::size_t counts[] = {1, 3, 17, 255, 1024, 4099, 65537, std::size_t{1} << 18};
  for (const int n : {3, 4}) {
    CAPTURE(n);
    // The inputs do depend on the order: summing in reverse changes many results.
    const auto forward = test::det_fold_f32(n, 4096), backward = test::det_fold_f32(n, 4096, true);
    int differ = 0;
    for (std::size_t i = 0; i < forward.size(); ++i) differ += std::memcmp(&forward[i], &backward[i], 4) != 0;
    CHECK(differ > 100);
    for (const std::size_t chunk : {std::size_t{1} << 20, std::size_t{256}}) {
      Config cfg;
      cfg.deterministic = true;
      cfg.chunk_bytes = chunk;
      test::run_local(n, cfg, [&](Communicator& c) {
        std::vector<std::string> names{"auto"};
        for (const auto& cand : c.candidates(Collective::allreduce, 64))
          if (cand.deterministic) names.push_back(cand.algorithm);
        REQUIRE(names.size() >= 3);
        for (const std::size_t count : counts) {
          const auto want32 = test::det_fold_f32(n, count);
          const auto want16 = test::det_fold_bf16(n, count);
          std::vector<float> in32(count), out32(count);
          std::vector<std::uint16_t> in16(count), out16(count);
          for (std::size_t i = 0; i < count; ++i) {
            in32[i] = test::det_value(c.rank(), i);
            in16[i] = test::to_bf16(in32[i]);
          }
          for (const auto& name : names) {
            CAPTURE(count);
            CAPTURE(name);
            CallOptions o;
            o.algorithm = name;
            c.allreduce(view(in32), view(out32), ReduceOp::sum, o);
            CHECK(std::memcmp(out32.data(), want32.data(), count * 4) == 0);
            c.allreduce(ConstView{in16.data(), count, DataType::bf16}, View{out16.data(), count, DataType::bf16},
                        ReduceOp::sum, o);
            CHECK(std::memcmp(out16.data(), want16.data(), count * 2) == 0);
          }
        }
      });
    }
  }
}
