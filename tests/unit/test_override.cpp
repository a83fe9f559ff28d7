// The COMM_ALGO override grammar: valid strings parse to the rules they say;
// malformed ones raise invalid_config naming the position and the problem.

#include "select/override_parser.hpp"

#include <comm/error.hpp>
#include <doctest/doctest.h>

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

TEST_CASE("override: malformed strings say where and why") {
  struct Bad {
    const char* text;
    const char* expect;
  };
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
  for (const auto& b : cases) {
    const std::string text = b.text;
    CAPTURE(text);
    try {
      parse_override(b.text);
      FAIL("accepted a malformed override");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_config);
      const std::string msg = e.what();
      CHECK(msg.find(b.expect) != std::string::npos);
      CHECK(msg.find("position") != std::string::npos);
    }
  }
}
