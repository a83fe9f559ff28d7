#pragma once
// Helpers of the store tests (test_store.cpp, test_store_abuse.cpp): TCP
// stores on loopback, errors as text, and raw sockets that speak (or abuse)
// the wire protocol directly.

#include <comm/error.hpp>
#include <comm/store.hpp>

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace comm::test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline std::string error_of(const std::function<void()>& fn, comm::ErrorCode* code = nullptr) {
  try {
    fn();
  } catch (const comm::Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "";
}

inline std::shared_ptr<comm::Store> tcp_server(const std::string& token = "") {
  comm::TcpStoreOptions o;
  o.is_server = true;
  o.token = token;
  o.connect_timeout = 2s;
  return comm::make_tcp_store(o);
}

inline std::shared_ptr<comm::Store> tcp_client(std::uint16_t port, const std::string& token = "",
                                               std::chrono::milliseconds connect_timeout = 2s) {
  comm::TcpStoreOptions o;
  o.port = port;
  o.token = token;
  o.connect_timeout = connect_timeout;
  return comm::make_tcp_store(o);
}

// ---- raw-socket helpers for the server's defences

inline int raw_connect(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

inline void raw_send(int fd, const std::string& bytes) {
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
}

// Reads until the peer closes or `limit` passes; true if it closed.
inline bool closed_by_peer(int fd, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  char buf[256];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
  return false;
}

inline std::string be32(std::uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>(v >> (24 - 8 * i));
  return s;
}

// Connects, reads the greeting and authenticates without a token (the server has none).
inline int raw_authenticated(std::uint16_t port) {
  const int fd = raw_connect(port);
  char hello[26];
  REQUIRE(::recv(fd, hello, sizeof hello, MSG_WAITALL) == 26);
  CHECK(std::string(hello + 4, 4) == "CMST");
  // Op::auth, empty digest, rank not said (0xffffffff), world size 0, instance 0.
  // Op::auth, empty digest, rank not said (0xffffffff), world size 0, instance 0.
  raw_send(fd, be32(21) + std::string("\x01\0\0\0\0", 5) + be32(0xffffffffu) + be32(0) + std::string(8, '\0'));
  char reply[5];
  REQUIRE(::recv(fd, reply, sizeof reply, MSG_WAITALL) == 5);
  CHECK(reply[4] == 0);  // Status::ok
  return fd;
}

// The server still serves a well-behaved client quickly.
inline void check_still_serving(comm::Store& s, const std::string& tag) {
  const auto t0 = Clock::now();
  s.set("alive-" + tag, tag);
  CHECK(s.get("alive-" + tag, 1s) == tag);
  CHECK(Clock::now() - t0 < 1s);
}

}  // namespace comm::test
