#pragma once
// SHA-256 and HMAC-SHA-256 (FIPS 180-4, RFC 2104), used by the TCP store to
// prove knowledge of the shared token without sending it; checked against the
// FIPS 180-4 and RFC 4231 vectors in tests/unit/test_sha256.cpp.
//
// What store authentication guarantees, and what it does not: at connect, the
// server sends a fresh random nonce and admits a client only if it answers
// HMAC-SHA-256(token, nonce), so a process that does not know COMM_STORE_TOKEN
// cannot join or read the store, and a recorded answer cannot be replayed
// (each connection gets its own nonce). That is all: the client does not
// authenticate the server, and after the handshake frames travel in the clear
// with no MAC, so an attacker on the path can read, change or inject store
// traffic on an admitted connection. The token keeps other jobs and stray
// clients out; it is not integrity or confidentiality (use a trusted network,
// or a tunnel, for that).

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
