// What the TCP store server does with each request: authentication, then
// set, get/wait, add, check/erase and bye (store_tcp_server.cpp runs the loop).
#include "bootstrap/store_tcp_server_loop.hpp"

#include "util/sha256.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>

namespace comm::detail {

using tcp_server::Conn;
using tcp_server::Pending;
using wire::Op;
using wire::Status;

namespace {

bool equal_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

void TcpStoreServer::Loop::reject(Conn& c, const std::string& why) {
  warn_rejected("store server: rejected client " + c.peer + ": " + why + "; closed its connection");
  c.dead = true;
}

void TcpStoreServer::Loop::handle(Conn& c, std::string_view payload) {
  wire::Reader r(payload);
  const auto op = static_cast<Op>(r.u8());
  if (!c.authed) {
    if (op != Op::auth) {
      reject(c, "sent a request before authenticating");
      return;
    }
    authenticate(c, r);
    return;
  }
  if (!world.error().empty()) {  // the job cannot work: every request says why
    reply(c, wire::Writer{}.u8(static_cast<std::uint8_t>(Status::world_error)).str(world.error()).finish());
    flush(c);
    return;
  }
  bool answered = false;  // false: rejected (the connection is closed, nothing flushed)
  switch (op) {
    case Op::set: answered = handle_set(c, r); break;
    case Op::get:
    case Op::wait: answered = handle_get_or_wait(c, op, r); break;
    case Op::add: answered = handle_add(c, r); break;
    case Op::check:
    case Op::erase: answered = handle_check_or_erase(c, op, r); break;
    case Op::bye: answered = handle_bye(c, r); break;
    case Op::auth: reject(c, "authenticated twice"); break;
    default: reject(c, "unknown request type " + std::to_string(static_cast<int>(op))); break;
  }
  if (answered) flush(c);
}

bool TcpStoreServer::Loop::handle_set(Conn& c, wire::Reader& r) {
  const std::string_view key = r.str(opt.max_key_bytes);
  const std::string_view value = r.str(opt.max_value_bytes);
  if (!r.done()) {
    reject(c, "malformed set request (or key/value over the limits)");
    return false;
  }
  data[std::string(key)] = std::string(value);
  reply(c, ok_frame().finish());
  wake_waiters();
  return true;
}

bool TcpStoreServer::Loop::handle_get_or_wait(Conn& c, Op op, wire::Reader& r) {
  Pending p;
  p.op = op;
  const std::uint32_t n = op == Op::get ? 1 : r.u32();
  if (n > max_frame / 4) {
    reject(c, "malformed wait request (key count)");
    return false;
  }
  for (std::uint32_t i = 0; i < n && r.ok(); ++i) p.keys.emplace_back(r.str(opt.max_key_bytes));
  const std::uint64_t ms = r.u64();
  if (!r.done()) {
    reject(c, "malformed get/wait request");
    return false;
  }
  p.deadline = deadline_after(std::chrono::milliseconds(
      static_cast<std::chrono::milliseconds::rep>(std::min<std::uint64_t>(ms, INT64_MAX / 2))));
  c.pending = std::move(p);
  if (satisfied(*c.pending)) answer_pending(c);
  return true;
}

bool TcpStoreServer::Loop::handle_add(Conn& c, wire::Reader& r) {
  const std::string key(r.str(opt.max_key_bytes));
  const auto delta = static_cast<std::int64_t>(r.u64());
  if (!r.done()) {
    reject(c, "malformed add request");
    return false;
  }
  std::int64_t value = 0;
  if (auto it = data.find(key); it != data.end()) {
    const std::string& s = it->second;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc{} || end != s.data() + s.size()) {
      reply(c, wire::Writer{}.u8(static_cast<std::uint8_t>(Status::error))
                   .str("key '" + key + "' holds a value that is not an integer")
                   .finish());
      return true;
    }
  }
  // Wrap like two's complement instead of overflowing (undefined for int64).
  value = static_cast<std::int64_t>(static_cast<std::uint64_t>(value) + static_cast<std::uint64_t>(delta));
  data[key] = std::to_string(value);
  reply(c, ok_frame().u64(static_cast<std::uint64_t>(value)).finish());
  wake_waiters();
  return true;
}

bool TcpStoreServer::Loop::handle_check_or_erase(Conn& c, Op op, wire::Reader& r) {
  const std::string key(r.str(opt.max_key_bytes));
  if (!r.done()) {
    reject(c, "malformed check/erase request");
    return false;
  }
  const bool found = op == Op::check ? data.count(key) != 0 : data.erase(key) != 0;
  reply(c, ok_frame().u8(found ? 1 : 0).finish());
  return true;
}

bool TcpStoreServer::Loop::handle_bye(Conn& c, wire::Reader& r) {
  if (!r.done()) {
    reject(c, "malformed bye request");
    return false;
  }
  if (c.rank >= 0) departed.insert(c.rank);
  reply(c, ok_frame().finish());
  return true;
}

void TcpStoreServer::Loop::authenticate(Conn& c, wire::Reader& r) {
  const std::string_view digest = r.str(64);
  const std::uint32_t rank = r.u32(), size = r.u32();
  const std::uint64_t instance = r.u64();
  if (!r.done() || (rank != wire::kNoRank && (size == 0 || rank >= size))) {
    reject(c, "malformed authentication frame");
    return;
  }
  bool good = digest.empty() && opt.token.empty();
  if (!opt.token.empty()) {
    const Sha256Digest want = hmac_sha256(opt.token, c.nonce);
    good = equal_constant_time(digest, std::string_view(reinterpret_cast<const char*>(want.data()), want.size()));
  }
  if (!good) {
    reply(c, wire::Writer{}.u8(static_cast<std::uint8_t>(Status::error))
                 .str("authentication failed: the client's store token does not match the server's")
                 .finish());
    flush(c);  // best effort: the reply is tiny and the socket buffer empty
    reject(c, "wrong store token");
    return;
  }
  const bool said = rank != wire::kNoRank;
  const bool had_error = !world.error().empty();
  if (said) notice_closed(static_cast<int>(rank));
  const std::string& problem =
      said ? world.claim(static_cast<int>(rank), static_cast<int>(size), instance, c.peer) : world.error();
  if (!problem.empty()) {
    reply(c, wire::Writer{}.u8(static_cast<std::uint8_t>(Status::world_error)).str(problem).finish());
    flush(c);
    c.dead = true;
    if (!had_error) fail_world(problem);
    return;
  }
  c.authed = true;
  if (said) {
    c.rank = static_cast<int>(rank);
    c.instance = instance;
    departed.erase(c.rank);  // a new store object of a rank that left: watched again
  }
  reply(c, wire::Writer{}.u8(static_cast<std::uint8_t>(Status::ok)).finish());
  flush(c);
}

// The ranks disagree on the world: answer every parked request with why
// (later requests get the same answer in handle()).
void TcpStoreServer::Loop::fail_world(const std::string& why) {
  COMM_WARN("store server: " << why);
  world_failed.store(true, std::memory_order_release);
  for (Conn& c : conns) {
    if (c.dead || !c.pending) continue;
    reply(c, wire::Writer{}.u8(static_cast<std::uint8_t>(Status::world_error)).str(why).finish());
    c.pending.reset();
    c.resume = true;
    flush(c);
  }
}

}  // namespace comm::detail
