#pragma once
// Parser of the algorithm override string (Config::algo_override / COMM_ALGO):
//   entry (';' entry)*         entry: collective '=' rule (',' rule)*
//   rule: algorithm [':' range]   range: [size] '-' [size]   size: digits [K|M|G] (binary)
// e.g. "allreduce=direct:0-64K,ring:64K-;alltoall=pairwise". A range is
// [lo, hi) in bytes; a rule without a range covers every size. Rules of one
// collective (in one entry or several) must not overlap: each size has at
// most one rule, so the order of the string never decides silently.
// Whitespace around tokens is ignored.
// Only syntax is checked here; algorithm names are validated by the caller
// against what exists for each collective.

#include <comm/types.hpp>

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace comm {

struct OverrideRule {
  Collective collective;
  std::string algorithm;
  std::size_t min_bytes = 0;
  std::size_t max_bytes = std::numeric_limits<std::size_t>::max();
};

// Throws comm::Error(invalid_config) naming the position and what was expected.
std::vector<OverrideRule> parse_override(std::string_view text);

}  // namespace comm
