#pragma once
// Small POSIX TCP helpers for the bootstrap store: an owning descriptor,
// address parsing, connect with a deadline, listen, and deadline-bounded I/O.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace comm::detail {

using Clock = std::chrono::steady_clock;

/// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() noexcept = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  int release() noexcept;
  void reset() noexcept;

 private:
  int fd_ = -1;
};

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};

/// Splits "host:port" or "[v6addr]:port"; throws invalid_config naming `what`.
HostPort parse_host_port(std::string_view text, std::string_view what);

/// "host:port", bracketing IPv6 literals.
std::string format_host_port(std::string_view host, std::uint16_t port);

/// Tries once to connect until `deadline`. Returns an invalid Fd and sets
/// `error` (with `refused` for ECONNREFUSED) on failure. The socket returned is
/// non-blocking, close-on-exec, with TCP_NODELAY.
Fd try_connect(const std::string& host, std::uint16_t port, Clock::time_point deadline,
               std::string& error, bool& refused);

/// A non-blocking listening socket on host:port (port 0 = any free port).
/// Throws store_failure on error.
Fd listen_tcp(const std::string& host, std::uint16_t port, int backlog);

/// The local port of a bound socket (0 on error).
std::uint16_t local_port(int fd) noexcept;

enum class IoResult { ok, closed, timed_out, error };

/// Writes all bytes to a non-blocking socket before `deadline`.
IoResult send_all(int fd, const void* data, std::size_t size, Clock::time_point deadline) noexcept;
/// Reads exactly `size` bytes from a non-blocking socket before `deadline`.
IoResult recv_exact(int fd, void* data, std::size_t size, Clock::time_point deadline) noexcept;

/// Milliseconds from now until `deadline`, clamped to [0, INT_MAX] for poll().
int poll_timeout_ms(Clock::time_point deadline) noexcept;

/// now + d without overflow for huge durations (milliseconds::max()).
Clock::time_point deadline_after(std::chrono::milliseconds d) noexcept;

}  // namespace comm::detail
