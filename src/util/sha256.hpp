#pragma once
// SHA-256 and HMAC-SHA-256 (FIPS 180-4, RFC 2104), used by the TCP store to
// prove knowledge of the shared token without sending it.

#include <array>
#include <cstdint>
#include <string_view>

namespace comm::detail {

using Sha256Digest = std::array<std::uint8_t, 32>;

Sha256Digest sha256(std::string_view data) noexcept;
Sha256Digest hmac_sha256(std::string_view key, std::string_view message) noexcept;
/// Lower-case hex of a digest.
std::string_view to_hex(const Sha256Digest& d, std::array<char, 64>& out) noexcept;

}  // namespace comm::detail
