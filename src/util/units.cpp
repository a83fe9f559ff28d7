#include "util/units.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>

namespace comm::util {

std::optional<std::size_t> parse_bytes(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return std::nullopt;
  std::uint64_t number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + digits, number);
  if (ec != std::errc{} || end != text.data() + digits) return std::nullopt;
  std::string suffix;
  for (char c : text.substr(digits)) suffix += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  // "64K", "64KB" and "64KiB" all mean 64 * 1024: sizes here are buffer sizes.
  if (suffix.size() == 3 && suffix.substr(1) == "ib") suffix.resize(1);
  if (suffix.size() == 2 && suffix[1] == 'b' && suffix[0] != 'b') suffix.resize(1);
  unsigned shift = 0;
  if (suffix.empty() || suffix == "b") shift = 0;
  else if (suffix == "k") shift = 10;
  else if (suffix == "m") shift = 20;
  else if (suffix == "g") shift = 30;
  else if (suffix == "t") shift = 40;
  else return std::nullopt;
  const std::uint64_t limit = std::numeric_limits<std::size_t>::max();
  if (number > (limit >> shift)) return std::nullopt;
  return static_cast<std::size_t>(number << shift);
}

std::optional<std::int64_t> parse_integer(std::string_view text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<double> parse_real(std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace comm::util
