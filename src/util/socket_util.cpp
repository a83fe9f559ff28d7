#include "util/socket_util.hpp"

#include <comm/error.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>

namespace comm::detail {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() { reset(); }

int Fd::release() noexcept {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

HostPort parse_host_port(std::string_view text, std::string_view what) {
  const auto fail = [&](const char* why) {
    throw Error(ErrorCode::invalid_config, std::string(what) + "='" + std::string(text) +
                                               "' is not a valid address: " + why +
                                               " (expected host:port or [ipv6]:port)");
  };
  HostPort hp;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      fail("unbalanced brackets or missing port");
    hp.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) fail("missing ':port'");
    if (text.substr(0, colon).find(':') != std::string_view::npos)
      fail("an IPv6 address needs brackets");
    hp.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
  }
  if (hp.host.empty()) fail("empty host");
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value > 65535)
    fail("the port must be a number in [0, 65535]");
  hp.port = static_cast<std::uint16_t>(value);
  return hp;
}

std::string format_host_port(std::string_view host, std::uint16_t port) {
  const bool v6 = host.find(':') != std::string_view::npos;
  return (v6 ? "[" + std::string(host) + "]" : std::string(host)) + ":" + std::to_string(port);
}

namespace {

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) freeaddrinfo(list);
  }
};

int resolve(const std::string& host, std::uint16_t port, bool passive, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string service = std::to_string(port);
  return getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out.list);
}

void set_nodelay(int fd) noexcept {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

Fd try_connect(const std::string& host, std::uint16_t port, Clock::time_point deadline,
               std::string& error, bool& refused) {
  refused = false;
  AddrInfo ai;
  if (int rc = resolve(host, port, false, ai); rc != 0) {
    error = std::string("cannot resolve '") + host + "': " + gai_strerror(rc);
    return {};
  }
  for (addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      error = std::string("socket(): ") + std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      rc = ::poll(&p, 1, poll_timeout_ms(deadline));
      if (rc == 0) {
        error = "connection attempt timed out";
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      if (rc < 0) err = errno;
      else ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      errno = err;
      rc = err == 0 ? 0 : -1;
    }
    if (rc != 0) {
      refused = errno == ECONNREFUSED;
      error = std::strerror(errno);
      continue;
    }
    set_nodelay(fd.get());
    return fd;
  }
  return {};
}

Fd listen_tcp(const std::string& host, std::uint16_t port, int backlog) {
  AddrInfo ai;
  if (int rc = resolve(host, port, true, ai); rc != 0)
    throw Error(ErrorCode::store_failure, "store server: cannot resolve listen address '" + host +
                                              "': " + gai_strerror(rc));
  std::string last = "no address";
  for (addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      last = std::string("socket(): ") + std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), backlog) != 0) {
      last = std::strerror(errno);
      continue;
    }
    return fd;
  }
  throw Error(ErrorCode::store_failure, "store server: cannot listen on " +
                                            format_host_port(host, port) + ": " + last +
                                            " (is another job using that port?)");
}

std::uint16_t local_port(int fd) noexcept {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

int poll_timeout_ms(Clock::time_point deadline) noexcept {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > INT_MAX ? INT_MAX : static_cast<int>(left);
}

Clock::time_point deadline_after(std::chrono::milliseconds d) noexcept {
  constexpr std::chrono::milliseconds kYear{365LL * 86400 * 1000};
  return Clock::now() + (d > kYear ? kYear : d);
}

IoResult send_all(int fd, const void* data, std::size_t size, Clock::time_point deadline) noexcept {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      size -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pf{fd, POLLOUT, 0};
      const int rc = ::poll(&pf, 1, poll_timeout_ms(deadline));
      if (rc == 0) return IoResult::timed_out;
      if (rc < 0 && errno != EINTR) return IoResult::error;
      continue;
    }
    return (errno == EPIPE || errno == ECONNRESET) ? IoResult::closed : IoResult::error;
  }
  return IoResult::ok;
}

IoResult recv_exact(int fd, void* data, std::size_t size, Clock::time_point deadline) noexcept {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::recv(fd, p, size, 0);
    if (n > 0) {
      p += n;
      size -= static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) return IoResult::closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd pf{fd, POLLIN, 0};
      const int rc = ::poll(&pf, 1, poll_timeout_ms(deadline));
      if (rc == 0) return IoResult::timed_out;
      if (rc < 0 && errno != EINTR) return IoResult::error;
      continue;
    }
    return errno == ECONNRESET ? IoResult::closed : IoResult::error;
  }
  return IoResult::ok;
}

}  // namespace comm::detail
