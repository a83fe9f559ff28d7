// Known-answer tests of the SHA-256 and HMAC-SHA-256 code behind the TCP
// store's token check: the FIPS 180-4 example messages (NIST CSRC "SHA-256
// examples") and the seven HMAC-SHA-256 cases of RFC 4231, plus messages whose
// lengths sit on the padding boundaries (digests from Python's hashlib, an
// independent implementation).

#include "util/sha256.hpp"

#include <doctest/doctest.h>

#include <string>

using comm::detail::hmac_sha256;
using comm::detail::sha256;
using comm::detail::Sha256Digest;

namespace {

std::string hex(const Sha256Digest& d) {
  std::array<char, 64> buf{};
  return std::string(comm::detail::to_hex(d, buf));
}

std::string repeat(char c, std::size_t n) { return std::string(n, c); }

}  // namespace

TEST_CASE("SHA-256: FIPS 180-4 example messages") {
  CHECK(hex(sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex(sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 448 bits: the padding no longer fits the first block.
  CHECK(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(hex(sha256("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrs"
                   "tnopqrstu")) == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  CHECK(hex(sha256(repeat('a', 1'000'000))) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("SHA-256: lengths around the 64-byte block and its 8-byte length field") {
  // Byte i of the message is (7 i + 3) mod 256.
  const std::pair<std::size_t, const char*> cases[] = {
      {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
      {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
      {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
      {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
      {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
      {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
      {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
  };
  for (const auto& [n, want] : cases) {
    std::string m(n, '\0');
    for (std::size_t i = 0; i < n; ++i) m[i] = static_cast<char>((7 * i + 3) % 256);
    CAPTURE(n);
    CHECK(hex(sha256(m)) == want);
  }
}

TEST_CASE("HMAC-SHA-256: RFC 4231 test cases 1-7") {
  std::string key4;
  for (int b = 1; b <= 25; ++b) key4 += static_cast<char>(b);
  // Case 1: a 20-byte key; case 2: a key shorter than the output.
  CHECK(hex(hmac_sha256(repeat('\x0b', 20), "Hi There")) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hex(hmac_sha256("Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Cases 3 and 4: key and data of bytes that are not text.
  CHECK(hex(hmac_sha256(repeat('\xaa', 20), repeat('\xdd', 50))) ==
        "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  CHECK(hex(hmac_sha256(key4, repeat('\xcd', 50))) ==
        "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // Case 5: the RFC gives only the first 128 bits.
  CHECK(hex(hmac_sha256(repeat('\x0c', 20), "Test With Truncation")).substr(0, 32) ==
        "a3b6167473100ee06e0c796c2955552b");
  // Cases 6 and 7: a 131-byte key, longer than the block, is hashed first.
  CHECK(hex(hmac_sha256(repeat('\xaa', 131), "Test Using Larger Than Block-Size Key - Hash Key First")) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  CHECK(hex(hmac_sha256(repeat('\xaa', 131),
                        "This is a test using a larger than block-size key and a larger than block-size data. The "
                        "key needs to be hashed before being used by the HMAC algorithm.")) ==
        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST_CASE("HMAC-SHA-256: a different key or message changes the digest") {
  const Sha256Digest base = hmac_sha256("job-token", "nonce-0123456789");
  CHECK(hmac_sha256("job-token", "nonce-0123456789") == base);
  CHECK(hmac_sha256("job-tokeN", "nonce-0123456789") != base);
  CHECK(hmac_sha256("job-token", "nonce-0123456788") != base);
  CHECK(hmac_sha256("", "nonce-0123456789") != base);
}
