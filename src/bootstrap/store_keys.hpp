#pragma once
// Conventions about store keys that the stores and the core share.
//
// - Keys a rank publishes for the others end in "/<rank>" ("c1/peer/3",
//   "c1/ucx/addr/3"), so a key that never appears names the rank that
//   should have set it.
// - The TCP store server records, in its root namespace, every client rank
//   whose connection closed without a goodbye (the process died): the
//   reason under "comm/lost/<rank>", and the list of such ranks
//   ("3 5 ") under "comm/lost". Ranks are the store clients' own
//   (TcpStoreOptions::rank, the Config rank of the process).

#include <charconv>
#include <sstream>
#include <vector>
#include <optional>
#include <string>
#include <string_view>

namespace comm::detail {

inline constexpr std::string_view kLostRanksKey = "comm/lost";
inline std::string lost_rank_key(int rank) { return std::string(kLostRanksKey) + "/" + std::to_string(rank); }

/// The ranks listed under kLostRanksKey, in the order they were lost.
inline std::vector<int> parse_lost_ranks(const std::string& list) {
  std::vector<int> ranks;
  std::istringstream in(list);
  for (int r; in >> r;) ranks.push_back(r);
  return ranks;
}

/// The rank a key belongs to by the "/<rank>" convention; nullopt otherwise.
inline std::optional<int> key_rank(std::string_view key) {
  const auto slash = key.rfind('/');
  const std::string_view tail = slash == std::string_view::npos ? key : key.substr(slash + 1);
  int rank = -1;
  const auto [end, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), rank);
  if (tail.empty() || ec != std::errc{} || end != tail.data() + tail.size() || rank < 0) return std::nullopt;
  return rank;
}

/// " (rank 3 sets it: has it started, with the same store and world size?)"
/// for a rank-suffixed key, else "".
inline std::string key_owner_hint(std::string_view key) {
  const auto r = key_rank(key);
  if (!r) return {};
  return " (rank " + std::to_string(*r) +
         " sets it and has not: has it started, with the same store and world size, or did it fail?)";
}

}  // namespace comm::detail
