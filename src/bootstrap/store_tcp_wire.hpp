#pragma once
// Wire format of the TCP store, shared by client and server.
//
// Every message is a frame: a 4-byte big-endian payload length, then the
// payload. On accept the server sends a hello frame
//   "CMST" | u8 version | u8 token_required | 16-byte nonce
// and the client's first frame must be
//   u8 Op::auth | str digest | u32 rank | u32 world_size | u64 instance
// (digest: HMAC-SHA-256(token, nonce), or "" without a token, see util/sha256.hpp
// for what it does and does not guarantee; rank kNoRank
// when the client does not say; instance: random per client store object),
// at most kMaxAuthFrame bytes, answered by a response; nothing else is
// served, or buffered, before it. The server checks the rank against the
// world it knows: a rank claimed by two live clients, or a world size that
// differs from the others', is answered Status::world_error, and from then on
// every request of every client is (the job cannot work). A client that is
// done says Op::bye first, so the server can tell a rank that left from one
// whose process died. Requests are
//   u8 op | fields (str = u32 length + bytes, integers big-endian)
// and each gets one response: u8 Status | payload. A client has at most one
// request in flight per connection. Any frame that breaks these rules closes
// that connection only.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace comm::detail::wire {

inline constexpr char kMagic[4] = {'C', 'M', 'S', 'T'};
inline constexpr std::uint8_t kVersion = 2;
inline constexpr std::size_t kNonceBytes = 16;
inline constexpr std::size_t kHelloBytes = 4 + 1 + 1 + kNonceBytes;
/// Room for opcode, lengths and integers around the key and value of a frame.
inline constexpr std::size_t kFrameOverhead = 64;
/// The longest authentication frame (payload): 1 + 4 + 64 + 4 + 4 + 8 with room.
inline constexpr std::size_t kMaxAuthFrame = 128;
/// The rank field of a client that does not say which rank it is.
inline constexpr std::uint32_t kNoRank = 0xffffffffu;
/// At most this many missing keys are listed in a timeout response.
inline constexpr std::uint32_t kMaxListedKeys = 16;

enum class Op : std::uint8_t { auth = 1, set, get, wait, add, check, erase, bye };
enum class Status : std::uint8_t { ok = 0, timed_out = 1, error = 2, world_error = 3 };

/// Builds a frame: reserve the length, append fields, then finish().
class Writer {
 public:
  Writer() { buf_.assign(4, '\0'); }
  Writer& u8(std::uint8_t v) {
    buf_.push_back(static_cast<char>(v));
    return *this;
  }
  Writer& u32(std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) buf_.push_back(static_cast<char>((v >> s) & 0xff));
    return *this;
  }
  Writer& u64(std::uint64_t v) {
    for (int s = 56; s >= 0; s -= 8) buf_.push_back(static_cast<char>((v >> s) & 0xff));
    return *this;
  }
  Writer& str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    buf_.append(s);
    return *this;
  }
  Writer& raw(std::string_view s) {
    buf_.append(s);
    return *this;
  }
  /// The complete frame, length prefix filled in; the writer is spent afterwards.
  std::string finish() {
    const auto n = static_cast<std::uint32_t>(buf_.size() - 4);
    for (int i = 0; i < 4; ++i) buf_[static_cast<std::size_t>(i)] = static_cast<char>((n >> (24 - 8 * i)) & 0xff);
    return std::move(buf_);
  }

 private:
  std::string buf_;
};

inline std::uint32_t read_u32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

/// Reads fields from a payload; any read past the end sets ok() to false
/// and yields zero/empty values, so a truncated frame is detected once at the end.
class Reader {
 public:
  explicit Reader(std::string_view payload) : p_(payload) {}
  std::uint8_t u8() {
    if (!need(1)) return 0;
    return static_cast<std::uint8_t>(p_[pos_++]);
  }
  std::uint32_t u32() {
    if (!need(4)) return 0;
    const std::uint32_t v = read_u32(p_.data() + pos_);
    pos_ += 4;
    return v;
  }
  std::uint64_t u64() {
    if (!need(8)) return 0;
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p_[pos_ + static_cast<std::size_t>(i)]);
    pos_ += 8;
    return v;
  }
  std::string_view str(std::size_t max_bytes) {
    const std::uint32_t n = u32();
    if (!ok_ || n > max_bytes || !need(n)) {
      ok_ = false;
      return {};
    }
    std::string_view s = p_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string_view raw(std::size_t n) {
    if (!need(n)) return {};
    std::string_view s = p_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  bool ok() const noexcept { return ok_; }
  /// True when every byte was consumed and nothing was out of bounds.
  bool done() const noexcept { return ok_ && pos_ == p_.size(); }

 private:
  bool need(std::size_t n) {
    if (!ok_ || p_.size() - pos_ < n) ok_ = false;
    return ok_;
  }
  std::string_view p_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace comm::detail::wire
