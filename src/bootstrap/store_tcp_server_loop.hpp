#pragma once
// The TCP store server's event loop, shared by store_tcp_server.cpp
// (sockets, polling, deadlines) and store_tcp_requests.cpp (what each
// request does). Private to src/bootstrap.

#include "bootstrap/store_tcp.hpp"
#include "bootstrap/store_tcp_wire.hpp"
#include "bootstrap/store_tcp_world.hpp"
#include "util/log.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace comm::detail {
namespace tcp_server {

// The first rest of the listener after accept() fails for want of descriptors.
constexpr auto kAcceptBackoffMin = std::chrono::milliseconds(50);
// Repeated warnings of one kind: at most one line per this period.
constexpr auto kWarnEvery = std::chrono::seconds(10);

// A warning that may repeat many times a second under abuse: logged at most
// once per kWarnEvery, saying how many were left out in between.
class RateLimitedWarning {
 public:
  void operator()(const std::string& message) {
    const auto now = Clock::now();
    if (now < next_) {
      ++suppressed_;
      return;
    }
    COMM_WARN(message << (suppressed_ ? " (" + std::to_string(suppressed_) + " more like it in the last " +
                                            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kWarnEvery).count()) +
                                            " s not shown)"
                                      : std::string()));
    suppressed_ = 0;
    next_ = now + kWarnEvery;
  }

 private:
  Clock::time_point next_{};
  std::size_t suppressed_ = 0;
};

// A get or wait parked until its keys exist or its deadline passes.
struct Pending {
  wire::Op op = wire::Op::get;
  std::vector<std::string> keys;
  Clock::time_point deadline;
};

// One client connection.
struct Conn {
  Fd fd;
  std::string peer;
  std::string nonce;
  std::string in;
  std::string out;
  std::size_t out_off = 0;
  bool authed = false;
  bool dead = false;
  int rank = -1;               // the rank it said it is (-1: not said)
  std::uint64_t instance = 0;  // its client store object
  bool resume = false;  // a parked request was answered; frames behind it wait in `in`
  Clock::time_point handshake_deadline;
  std::optional<Pending> pending;
};

}  // namespace tcp_server

struct TcpStoreServer::Loop {
  using Conn = tcp_server::Conn;
  using Pending = tcp_server::Pending;

  TcpStoreOptions opt;
  Fd listener;
  int wake_fd = -1;
  std::list<tcp_server::Conn> conns;
  std::unordered_map<std::string, std::string> data;
  std::size_t max_frame = 0;
  std::size_t max_unauthenticated = 0;
  WorldCheck world;
  std::atomic<bool> world_failed{false};  // read by the destructor's thread
  Clock::time_point accept_paused_until{};
  Clock::duration accept_backoff = tcp_server::kAcceptBackoffMin;
  tcp_server::RateLimitedWarning warn_no_fds, warn_full, warn_evicted, warn_rejected;
  std::unordered_set<int> departed;  // ranks that said goodbye
  std::unordered_set<int> lost;      // ranks whose connection closed without one

  void run();
  void accept_all();
  void read_from(Conn& c);
  void flush(Conn& c);
  void process(Conn& c);
  // One request of an authenticated client (or its authentication).
  void handle(Conn& c, std::string_view payload);
  // The requests after authentication; false when the request was malformed
  // and rejected (nothing to flush).
  bool handle_set(Conn& c, wire::Reader& r);
  bool handle_get_or_wait(Conn& c, wire::Op op, wire::Reader& r);
  bool handle_add(Conn& c, wire::Reader& r);
  bool handle_check_or_erase(Conn& c, wire::Op op, wire::Reader& r);
  bool handle_bye(Conn& c, wire::Reader& r);
  void reject(Conn& c, const std::string& why);
  bool evict_oldest_unauthenticated(const char* why);
  void notice_closed(int rank);
  void fail_world(const std::string& why);
  void authenticate(Conn& c, wire::Reader& r);
  void drop_dead();
  bool satisfied(const Pending& p) const;
  void answer_pending(Conn& c);
  void wake_waiters();
  void expire(Clock::time_point now);
  void resume_all();
  void note_closed(const Conn& c);
  Clock::time_point next_deadline() const;

  static wire::Writer ok_frame() { return wire::Writer{}.u8(static_cast<std::uint8_t>(wire::Status::ok)); }
  static void reply(Conn& c, std::string frame) {
    if (c.out_off == c.out.size()) {
      c.out.clear();
      c.out_off = 0;
    }
    c.out += frame;
  }
};

}  // namespace comm::detail
