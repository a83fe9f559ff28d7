// The COMM_ALGO override grammar: valid strings parse to the rules they say;
// malformed ones raise invalid_config naming the position and the problem.

#include "select/override_parser.hpp"

#include <comm/error.hpp>
#include <doctest/doctest.h>

#include <cstddef>
#include <limits>
#include <string>

using namespace comm;

TEST_CASE("override: the documented example") {
  auto rules = parse_override("allreduce=direct:0-64K,ring:64K-;alltoall=pairwise");
  REQUIRE(rules.size() == 3);
  CHECK(rules[0].collective == Collective::allreduce);
  CHECK(rules[0].algorithm == "direct");
  CHECK(rules[0].min_bytes == 0);
  CHECK(rules[0].max_bytes == 64 * 1024);
  CHECK(rules[1].algorithm == "ring");
  CHECK(rules[1].min_bytes == 64 * 1024);
  CHECK(rules[1].max_bytes == std::numeric_limits<std::size_t>::max());
  CHECK(rules[2].collective == Collective::all_to_all);
  CHECK(rules[2].algorithm == "pairwise");
  CHECK(rules[2].min_bytes == 0);
}

TEST_CASE("override: whitespace, suffixes, empty and trailing separators") {
  CHECK(parse_override("").empty());
  CHECK(parse_override("   ").empty());
  auto r = parse_override(" broadcast = tree : 1M - 2G ; ");
  REQUIRE(r.size() == 1);
  CHECK(r[0].min_bytes == (std::size_t{1} << 20));
  CHECK(r[0].max_bytes == (std::size_t{2} << 30));
  CHECK(parse_override("allreduce=ring:-4096")[0].max_bytes == 4096);
  CHECK(parse_override("allreduce=ring:4KB-")[0].min_bytes == 4096);
}

namespace {

struct Bad {
  const char* text;
  const char* expect;
};

// Every case must fail with invalid_config, a message holding `expect`, and the position.
template <std::size_t N>
void expect_rejected(const Bad (&cases)[N], const char* accepted) {
  for (const auto& b : cases) {
    const std::string text = b.text;
    CAPTURE(text);
    try {
      parse_override(b.text);
      FAIL(accepted);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_config);
      const std::string msg = e.what();
      CHECK_MESSAGE(msg.find(b.expect) != std::string::npos, msg);
      CHECK(msg.find("position") != std::string::npos);
    }
  }
}

}  // namespace

TEST_CASE("override: malformed strings say where and why") {
  const Bad cases[] = {
      {"allreduce", "expected '='"},
      {"allreduce=", "expected a name"},
      {"allredux=ring", "unknown collective 'allredux'"},
      {"allreduce=ring:", "expected a size range"},
      {"allreduce=ring:64K", "expected '-'"},
      {"allreduce=ring:64K-1K", "empty size range"},
      {"allreduce=ring:x-", "expected a size"},
      {"allreduce=ring;;", "expected a name"},
      {"allreduce=ring:99999999999999999999999-", "too large"},
      {"allreduce=ring bcast=tree", "expected ';'"},
  };
  expect_rejected(cases, "accepted a malformed override");
}

TEST_CASE("override: duplicate or overlapping rules for one collective are errors that say where") {
  const Bad cases[] = {
      {"allreduce=ring,tree", "the rule 'tree' for allreduce overlaps the rule 'ring' at position 10 (both cover every size)"},
      {"allreduce=direct:0-128K,ring:64K-", "the rule 'ring:64K-' for allreduce overlaps the rule 'direct:0-128K' at "
                                            "position 10 (both cover sizes 64K-128K)"},
      {"allreduce=ring;broadcast=tree;allreduce=direct:8-16", "'direct:8-16' for allreduce overlaps the rule 'ring'"},
      {"alltoall=pairwise;all_to_all=bruck:1M-", "overlaps the rule 'pairwise'"},  // two names, one collective
      {"allreduce=ring:1K-2K, ring:1536-", "both cover sizes 1536-2K"},
  };
  expect_rejected(cases, "accepted overlapping rules");
  // Adjacent ranges ([lo, hi) is half-open) and other collectives are fine.
  CHECK(parse_override("allreduce=direct:0-64K,ring:64K-;broadcast=tree;allgather=ring:-1M,direct:1M-").size() == 5);
}
