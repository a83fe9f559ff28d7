#pragma once
// Numbers as people type them, parsed without the locale (std::from_chars):
// byte counts with binary suffixes, integers and reals. Each returns nullopt
// for text that is not entirely such a number; callers name the variable or
// flag in their own error. No dependency on libcomm (see util/json.hpp).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace comm::util {

/// "4096", "64K", "64KB", "64KiB", "1M", "2G", "1T" (case-insensitive; K = 1024)
/// as bytes; nullopt if malformed or beyond size_t.
std::optional<std::size_t> parse_bytes(std::string_view text);

/// A whole decimal integer ("-3", "42"); nullopt if malformed or beyond int64.
std::optional<std::int64_t> parse_integer(std::string_view text);

/// A finite decimal real ("0.5", "2", "1e-3"); nullopt if malformed.
std::optional<double> parse_real(std::string_view text);

}  // namespace comm::util
