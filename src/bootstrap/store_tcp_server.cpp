#include "bootstrap/store_tcp.hpp"

#include "util/log.hpp"
#include "bootstrap/store_keys.hpp"
#include "bootstrap/store_tcp_server_loop.hpp"
#include "bootstrap/store_tcp_wire.hpp"
#include "bootstrap/store_tcp_world.hpp"

#include <comm/error.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

namespace comm::detail {

using tcp_server::Conn;
using tcp_server::kAcceptBackoffMin;
using tcp_server::Pending;

namespace {

using namespace std::chrono_literals;
using wire::Op;
using wire::Status;

// A client must authenticate within this time; otherwise its slot is freed.
constexpr auto kHandshakeTimeout = 30s;
constexpr std::size_t kReadChunk = 64 * 1024;
// After accept() fails for want of descriptors the listener rests this long
// (kAcceptBackoffMin, see store_tcp_server_loop.hpp), doubling up to this, so
// the loop does not spin on it.
constexpr auto kAcceptBackoffMax = 1s;
// After the ranks were found to disagree on the world, a server going away
// keeps answering this long, so that ranks still starting learn why instead
// of finding nothing listening.
constexpr auto kWorldErrorLinger = 2s;
// Default max_unauthenticated: a quarter of RLIMIT_NOFILE, at most this.
constexpr std::size_t kMaxUnauthenticatedDefault = 256;

std::size_t unauthenticated_limit(std::size_t configured) {
  if (configured) return configured;
  rlimit rl{};
  std::size_t fds = 1024;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) fds = static_cast<std::size_t>(rl.rlim_cur);
  return std::clamp<std::size_t>(fds / 4, 4, kMaxUnauthenticatedDefault);
}

std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char buf[INET6_ADDRSTRLEN] = "?";
  std::uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    port = ntohs(a->sin6_port);
  }
  return format_host_port(buf, port);
}

std::string random_nonce() {
  std::random_device rd;
  std::string n(wire::kNonceBytes, '\0');
  for (std::size_t i = 0; i < n.size(); i += 4) {
    const std::uint32_t r = rd();
    for (std::size_t j = 0; j < 4 && i + j < n.size(); ++j) n[i + j] = static_cast<char>(r >> (8 * j));
  }
  return n;
}

}  // namespace

TcpStoreServer::TcpStoreServer(const TcpStoreOptions& options) : loop_(std::make_unique<Loop>()) {
  loop_->opt = options;
  loop_->max_frame = options.max_key_bytes + options.max_value_bytes + wire::kFrameOverhead;
  loop_->max_unauthenticated = unauthenticated_limit(options.max_unauthenticated);
  loop_->world = WorldCheck(options.rank, options.world_size);
  const std::string& bind = options.bind.empty() ? options.host : options.bind;
  loop_->listener = listen_tcp(bind, options.port, 1024);
  port_ = local_port(loop_->listener.get());
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
    throw Error(ErrorCode::store_failure,
                std::string("store server: cannot create its wake-up pipe: ") + std::strerror(errno));
  wake_read_ = Fd(p[0]);
  wake_write_ = Fd(p[1]);
  loop_->wake_fd = wake_read_.get();
  // The server logs as the communicator that started it (its level and file).
  thread_ = std::thread([l = loop_.get(), log_context = log::current_shared()] {
    log::Scope log_scope(log_context);
    l->run();
  });
}

TcpStoreServer::~TcpStoreServer() {
  if (loop_->world_failed.load(std::memory_order_acquire)) std::this_thread::sleep_for(kWorldErrorLinger);
  const char byte = 1;
  // The loop only checks that the pipe is readable; a failed write (full pipe) still wakes it.
  [[maybe_unused]] ssize_t n = ::write(wake_write_.get(), &byte, 1);
  if (thread_.joinable()) thread_.join();
}

void TcpStoreServer::Loop::run() {
  std::vector<pollfd> fds;
  std::vector<Conn*> order;
  for (;;) {
    fds.clear();
    order.clear();
    fds.push_back({wake_fd, POLLIN, 0});
    const bool room = conns.size() < opt.max_connections && Clock::now() >= accept_paused_until;
    fds.push_back({listener.get(), static_cast<short>(room ? POLLIN : 0), 0});
    for (Conn& c : conns) {
      // While a get/wait is parked, stop reading (one request in flight per
      // connection) but still notice the client going away.
      short ev = POLLRDHUP;
      if (!c.pending) ev |= POLLIN;
      if (c.out_off < c.out.size()) ev |= POLLOUT;
      fds.push_back({c.fd.get(), ev, 0});
      order.push_back(&c);
    }
    const int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms(next_deadline()));
    if (rc < 0 && errno != EINTR) {
      COMM_WARN("store server: poll() failed: " << std::strerror(errno) << "; stopping the server");
      return;
    }
    if (fds[0].revents != 0) return;
    if (fds[1].revents & POLLIN) accept_all();
    for (std::size_t i = 0; i < order.size(); ++i) {
      Conn& c = *order[i];
      const short re = fds[i + 2].revents;
      if (re & POLLOUT) flush(c);
      if (!c.dead && (re & POLLIN)) read_from(c);
      else if (!c.dead && (re & (POLLRDHUP | POLLHUP | POLLERR))) c.dead = true;
    }
    expire(Clock::now());
    resume_all();
    drop_dead();
  }
}

void TcpStoreServer::Loop::drop_dead() {
  for (auto it = conns.begin(); it != conns.end();) {
    if (!it->dead) {
      ++it;
      continue;
    }
    note_closed(*it);
    if (it->rank >= 0) world.release(it->rank, it->instance);
    it = conns.erase(it);
  }
}

// Frees the slot and, at once, the descriptor of the connection that has
// waited longest without authenticating; false if there is none. (The entry
// goes in drop_dead: run() still holds pointers to it.)
bool TcpStoreServer::Loop::evict_oldest_unauthenticated(const char* why) {
  for (Conn& c : conns)
    if (!c.authed && !c.dead) {
      warn_evicted("store server: closed the connection of " + c.peer + ", which had not authenticated: " + why);
      c.dead = true;
      c.fd.reset();
      return true;
    }
  return false;
}

// Connections claiming `rank` whose client has already closed them (a rank
// that made a new store object right after destroying its old one) give up
// their claim now, before the close is seen in the poll loop.
void TcpStoreServer::Loop::notice_closed(int rank) {
  for (Conn& c : conns) {
    if (c.dead || c.rank != rank) continue;
    pollfd p{c.fd.get(), POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0 || !(p.revents & (POLLRDHUP | POLLHUP | POLLERR))) continue;
    world.release(c.rank, c.instance);
    c.rank = -1;
    c.dead = true;
  }
}

void TcpStoreServer::Loop::accept_all() {
  while (conns.size() < opt.max_connections) {
    Fd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno == EMFILE || errno == ENFILE) {
        // The process is out of descriptors: the listener stays readable, so
        // rest it instead of spinning, and free one if a stranger holds it.
        const int err = errno;
        const bool freed = evict_oldest_unauthenticated("the process is out of file descriptors");
        warn_no_fds(std::string("store server: cannot accept a connection: ") + std::strerror(err) +
                    (freed ? "; closed an unauthenticated one" : "") + "; pausing accept for " +
                    std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(accept_backoff).count()) +
                    " ms (raise ulimit -n?)");
        accept_paused_until = Clock::now() + accept_backoff;
        accept_backoff = std::min<Clock::duration>(accept_backoff * 2, kAcceptBackoffMax);
      }
      return;
    }
    accept_backoff = kAcceptBackoffMin;
    const auto unauthenticated = static_cast<std::size_t>(
        std::count_if(conns.begin(), conns.end(), [](const Conn& c) { return !c.authed && !c.dead; }));
    if (unauthenticated >= max_unauthenticated)
      evict_oldest_unauthenticated(("more than max_unauthenticated=" + std::to_string(max_unauthenticated) +
                                    " connections have not authenticated")
                                       .c_str());
    Conn& c = conns.emplace_back();
    c.fd = std::move(fd);
    c.peer = peer_name(c.fd.get());
    c.nonce = random_nonce();
    c.handshake_deadline = Clock::now() + kHandshakeTimeout;
    reply(c, wire::Writer{}
                 .raw(std::string_view(wire::kMagic, 4))
                 .u8(wire::kVersion)
                 .u8(opt.token.empty() ? 0 : 1)
                 .raw(c.nonce)
                 .finish());
    flush(c);
  }
  warn_full("store server: " + std::to_string(conns.size()) +
            " connections open (the limit, max_connections); new clients wait until one closes");
}

void TcpStoreServer::Loop::flush(Conn& c) {
  while (c.out_off < c.out.size()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_off += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.dead = true;  // the client went away; nothing to tell anyone
    return;
  }
  c.out.clear();
  c.out_off = 0;
}

void TcpStoreServer::Loop::read_from(Conn& c) {
  char buf[kReadChunk];
  const ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
  if (n < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) c.dead = true;
    return;
  }
  if (n == 0) {
    if (!c.in.empty())
      COMM_WARN("store server: client " << c.peer << " closed its connection in the middle of a frame ("
                                        << c.in.size() << " bytes of it received); dropped it");
    c.dead = true;
    return;
  }
  c.in.append(buf, static_cast<std::size_t>(n));
  process(c);
}

void TcpStoreServer::Loop::process(Conn& c) {
  std::size_t off = 0;
  while (!c.dead && !c.pending && c.in.size() - off >= 4) {
    const std::uint32_t len = wire::read_u32(c.in.data() + off);
    // Before authentication only the small auth frame is accepted, so a
    // stranger cannot make the server buffer megabytes.
    if (!c.authed && len > wire::kMaxAuthFrame) {
      reject(c, "sent a " + std::to_string(len) + "-byte frame before authenticating (at most " +
                    std::to_string(wire::kMaxAuthFrame) + ")");
      return;
    }
    if (len == 0 || len > max_frame) {
      reject(c, "frame length " + std::to_string(len) + " is outside [1, " + std::to_string(max_frame) +
                    "] bytes (max_key_bytes + max_value_bytes + overhead)");
      return;
    }
    if (c.in.size() - off - 4 < len) break;
    handle(c, std::string_view(c.in).substr(off + 4, len));
    off += 4 + len;
  }
  if (!c.dead) c.in.erase(0, off);
}

bool TcpStoreServer::Loop::satisfied(const Pending& p) const {
  return std::all_of(p.keys.begin(), p.keys.end(), [&](const std::string& k) { return data.count(k) != 0; });
}

void TcpStoreServer::Loop::answer_pending(Conn& c) {
  auto w = wire::Writer{}.u8(static_cast<std::uint8_t>(Status::ok));
  if (c.pending->op == Op::get) w.str(data.at(c.pending->keys.front()));
  reply(c, std::move(w).finish());
  c.pending.reset();
  c.resume = true;
  flush(c);
}

void TcpStoreServer::Loop::wake_waiters() {
  for (Conn& c : conns)
    if (c.pending && !c.dead && satisfied(*c.pending)) answer_pending(c);
}

void TcpStoreServer::Loop::expire(Clock::time_point now) {
  for (Conn& c : conns) {
    if (c.dead) continue;
    if (!c.authed && now >= c.handshake_deadline) {
      reject(c, "did not authenticate within " +
                    std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kHandshakeTimeout).count()) +
                    " s");
      continue;
    }
    if (c.pending && now >= c.pending->deadline) {
      std::vector<std::string_view> missing;
      for (const std::string& k : c.pending->keys)
        if (!data.count(k)) missing.push_back(k);
      auto w = wire::Writer{}.u8(static_cast<std::uint8_t>(Status::timed_out));
      w.u32(static_cast<std::uint32_t>(missing.size()));
      const auto listed = std::min<std::size_t>(missing.size(), wire::kMaxListedKeys);
      w.u32(static_cast<std::uint32_t>(listed));
      for (std::size_t i = 0; i < listed; ++i) w.str(missing[i]);
      reply(c, std::move(w).finish());
      c.pending.reset();
      c.resume = true;
      flush(c);
    }
  }
}

// Serves the requests queued behind answered get/waits. Done here rather than
// from answer_pending so that process() never runs inside itself.
void TcpStoreServer::Loop::resume_all() {
  for (bool progress = true; progress;) {
    progress = false;
    for (Conn& c : conns) {
      if (c.resume && !c.dead && !c.pending) {
        c.resume = false;
        process(c);
        progress = true;
      }
    }
  }
}

// A rank whose connection closes before it said goodbye has died (or left
// without closing its store): recorded under comm/lost (store_keys.hpp) so
// that ranks waiting for its keys can name it instead of timing out.
void TcpStoreServer::Loop::note_closed(const Conn& c) {
  if (!c.authed || c.rank < 0 || departed.count(c.rank) || !lost.insert(c.rank).second) return;
  data[lost_rank_key(c.rank)] = "its connection to the store (from " + c.peer +
                                ") closed without a goodbye: the process died, was killed, or exited without "
                                "destroying its store";
  data[std::string(kLostRanksKey)] += std::to_string(c.rank) + " ";
  COMM_INFO("store server: rank " << c.rank << " disconnected without a goodbye (" << c.peer << ")");
  wake_waiters();
}

Clock::time_point TcpStoreServer::Loop::next_deadline() const {
  auto next = Clock::now() + 1h;
  if (accept_paused_until > Clock::now()) next = std::min(next, accept_paused_until);
  for (const Conn& c : conns) {
    if (!c.authed) next = std::min(next, c.handshake_deadline);
    if (c.pending) next = std::min(next, c.pending->deadline);
  }
  return next;
}

}  // namespace comm::detail
