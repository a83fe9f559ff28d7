// The TCP store's client, and the store object that also owns the server on rank 0.

#include "bootstrap/store_tcp.hpp"

#include "util/log.hpp"
#include "util/process.hpp"
#include "util/sha256.hpp"
#include "util/socket_util.hpp"
#include "bootstrap/store_keys.hpp"
#include "bootstrap/store_tcp_wire.hpp"

#include <comm/error.hpp>
#include <comm/store.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

namespace comm {

namespace {

using namespace std::chrono_literals;
using detail::Clock;
using detail::Fd;
using detail::IoResult;
using detail::wire::Op;
using detail::wire::Status;

// Once a client has reached the server, a refused connection means the server
// is gone; retrying for the full connect_timeout would only delay the error.
constexpr auto kReconnectWindow = 5s;
// A get/wait reply may come this long after its timeout before the server is
// presumed lost (it answers timeouts itself, so this covers only a dead server).
constexpr auto kReplyGrace = 10s;
// One connection attempt; a dropped SYN must not use up the whole timeout.
constexpr auto kAttemptTimeout = 2s;
// A store that refuses connections this long is reported while retrying.
constexpr auto kRefusedWarnAfter = 2s;
constexpr auto kRefusedWarnEvery = 30s;

// What a failed exchange is reported as; the message names the store.
struct Failure {
  ErrorCode code;
  std::string message;
};

class TcpStore final : public Store {
 public:
  explicit TcpStore(const TcpStoreOptions& options) : opt_(options) {
    if (opt_.is_server) {
      server_.emplace(opt_);
      port_ = server_->port();
      // The server's own client reaches it on loopback when it listens on every interface.
      const std::string& bind = opt_.bind.empty() ? opt_.host : opt_.bind;
      connect_host_ = (bind == "0.0.0.0" || bind == "::" || bind.empty()) ? "127.0.0.1" : bind;
    } else {
      port_ = opt_.port;
      connect_host_ = opt_.host;
    }
    where_ = detail::format_host_port(connect_host_, port_);
    release(connect());  // fail at creation, not at first use, when nobody serves
  }

  ~TcpStore() override {
    say_goodbye();
    idle_.clear();
    server_.reset();
  }

  std::uint16_t port() const noexcept { return port_; }

  void set(const std::string& key, const std::string& value) override {
    check_key("set", key);
    if (value.size() > opt_.max_value_bytes)
      throw Error(ErrorCode::invalid_argument,
                  "store set: value of key '" + key + "' has " + std::to_string(value.size()) +
                      " bytes, more than max_value_bytes=" + std::to_string(opt_.max_value_bytes));
    call("set", detail::wire::Writer{}.u8(static_cast<std::uint8_t>(Op::set)).str(key).str(value).finish(),
         std::nullopt);
  }

  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    check_key("get", key);
    std::string reply = call("get",
                             detail::wire::Writer{}
                                 .u8(static_cast<std::uint8_t>(Op::get))
                                 .str(key)
                                 .u64(to_wire(timeout))
                                 .finish(),
                             timeout);
    detail::wire::Reader r(reply);
    std::string value(r.str(opt_.max_value_bytes));
    if (!r.done()) throw malformed("get");
    return value;
  }

  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    if (keys.empty()) return;
    detail::wire::Writer w;
    w.u8(static_cast<std::uint8_t>(Op::wait)).u32(static_cast<std::uint32_t>(keys.size()));
    std::size_t bytes = 0;
    for (const std::string& k : keys) {
      check_key("wait", k);
      bytes += k.size() + 4;
      w.str(k);
    }
    if (bytes > opt_.max_value_bytes)
      throw Error(ErrorCode::invalid_argument, "store wait: " + std::to_string(keys.size()) +
                                                   " keys are too many for one request; wait in batches");
    w.u64(to_wire(timeout));
    call("wait", w.finish(), timeout);
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    check_key("add", key);
    std::string reply = call("add",
                             detail::wire::Writer{}
                                 .u8(static_cast<std::uint8_t>(Op::add))
                                 .str(key)
                                 .u64(static_cast<std::uint64_t>(delta))
                                 .finish(),
                             std::nullopt);
    detail::wire::Reader r(reply);
    const auto v = static_cast<std::int64_t>(r.u64());
    if (!r.done()) throw malformed("add");
    return v;
  }

  bool check(const std::string& key) override { return flag_op("check", Op::check, key); }
  bool erase(const std::string& key) override { return flag_op("erase", Op::erase, key); }

 private:
  static std::uint64_t to_wire(std::chrono::milliseconds t) {
    return t.count() <= 0 ? 0 : static_cast<std::uint64_t>(t.count());
  }

  void check_key(const char* what, const std::string& key) const {
    if (key.size() > opt_.max_key_bytes)
      throw Error(ErrorCode::invalid_argument, std::string("store ") + what + ": key of " +
                                                   std::to_string(key.size()) + " bytes exceeds max_key_bytes=" +
                                                   std::to_string(opt_.max_key_bytes));
  }

  // Tells the server this rank leaves on purpose (see TcpStoreOptions::rank).
  // Best effort and brief: the server may be gone already.
  void say_goodbye() noexcept {
    if (opt_.rank < 0 || idle_.empty()) return;
    try {
      const std::string frame = detail::wire::Writer{}.u8(static_cast<std::uint8_t>(Op::bye)).finish();
      const auto deadline = detail::deadline_after(std::chrono::milliseconds(200));
      const int fd = idle_.back().get();
      char reply[16];
      if (detail::send_all(fd, frame.data(), frame.size(), deadline) == IoResult::ok)
        (void)detail::recv_exact(fd, reply, 5, deadline);  // u32 length 1 + Status::ok
    } catch (...) {
    }
  }

  // The store's host process (on this host) has exited: connecting is futile.
  bool server_exited() const {
    return opt_.server_pid > 0 && !detail::process_alive(opt_.server_pid, opt_.server_start_ticks);
  }

  Error malformed(const char* what) const {
    return Error(ErrorCode::store_failure, std::string("store ") + what + ": malformed reply from the store at " +
                                               where_ + " (a different program on that port?)");
  }

  // The server found that the ranks disagree on the world (payload: str why).
  Error world_error(const std::string& payload) const {
    detail::wire::Reader r(payload);
    const std::string why(r.str(opt_.max_value_bytes));
    if (!r.done()) return malformed("connect");
    return Error(ErrorCode::invalid_config, "store at " + where_ + ": " + why);
  }

  static std::uint64_t random_instance() {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }

  Error lost(const char* what, const std::string& why) const {
    return Error(ErrorCode::store_failure, std::string("store ") + what + ": lost the connection to the store at " +
                                               where_ + " (" + why +
                                               "); the rank hosting it (rank 0) has probably exited");
  }

  bool flag_op(const char* what, Op op, const std::string& key) {
    check_key(what, key);
    std::string reply = call(what, detail::wire::Writer{}.u8(static_cast<std::uint8_t>(op)).str(key).finish(),
                             std::nullopt);
    detail::wire::Reader r(reply);
    const bool found = r.u8() != 0;
    if (!r.done()) throw malformed(what);
    return found;
  }

  // Sends one request on a pooled connection and returns the ok payload.
  // `blocking` is the get/wait timeout, std::nullopt for immediate requests.
  std::string call(const char* what, const std::string& frame, std::optional<std::chrono::milliseconds> blocking) {
    Fd fd = take();
    const auto deadline = blocking ? detail::deadline_after(std::max(*blocking, 0ms) + kReplyGrace)
                                   : detail::deadline_after(std::max<std::chrono::milliseconds>(opt_.connect_timeout, 30s));
    std::string payload;
    if (auto io = detail::send_all(fd.get(), frame.data(), frame.size(), deadline); io != IoResult::ok)
      throw lost(what, io == IoResult::timed_out ? "the server stopped reading" : "sending failed");
    char head[4];
    IoResult io = detail::recv_exact(fd.get(), head, 4, deadline);
    const std::uint32_t len = io == IoResult::ok ? detail::wire::read_u32(head) : 0;
    if (io == IoResult::ok && (len == 0 || len > opt_.max_value_bytes + detail::wire::kFrameOverhead))
      throw malformed(what);
    if (io == IoResult::ok) {
      payload.resize(len);
      io = detail::recv_exact(fd.get(), payload.data(), len, deadline);
    }
    if (io == IoResult::timed_out) throw lost(what, "no reply within the timeout plus grace");
    if (io != IoResult::ok) throw lost(what, "connection closed");
    release(std::move(fd));

    detail::wire::Reader r(payload);
    switch (static_cast<Status>(r.u8())) {
      case Status::ok:
        return payload.substr(1);
      case Status::timed_out: {
        const std::uint32_t missing = r.u32();
        const std::uint32_t listed = r.u32();
        std::string names;
        std::optional<std::string> first_missing;
        for (std::uint32_t i = 0; i < listed && r.ok(); ++i) {
          const std::string key(r.str(opt_.max_key_bytes));
          if (!first_missing) first_missing = key;
          names += std::string(i ? ", '" : "'") + key + "'";
        }
        if (!r.done()) throw malformed(what);
        if (missing > listed) names += " and " + std::to_string(missing - listed) + " more";
        const std::string ms = std::to_string(blocking ? blocking->count() : 0);
        throw Error(ErrorCode::timeout,
                    std::string("store ") + what + ": " +
                        (missing == 1 ? "key " + names + " was" : std::to_string(missing) + " keys were") +
                        " not set within " + ms + " ms" + (missing == 1 ? "" : ": " + names) +
                        (missing == 1 && first_missing ? detail::key_owner_hint(*first_missing) : std::string()) +
                        " (store at " + where_ + "; is every rank running and using the same store?)");
      }
      case Status::error: {
        const std::string msg(r.str(opt_.max_value_bytes));
        if (!r.done()) throw malformed(what);
        throw Error(ErrorCode::invalid_argument, std::string("store ") + what + ": " + msg);
      }
      case Status::world_error:
        throw world_error(payload.substr(1));
    }
    throw malformed(what);
  }

  Fd take() {
    {
      std::lock_guard lk(mu_);
      if (!idle_.empty()) {
        Fd fd = std::move(idle_.back());
        idle_.pop_back();
        return fd;
      }
    }
    return connect();
  }

  void release(Fd fd) {
    std::lock_guard lk(mu_);
    idle_.push_back(std::move(fd));
  }

  // Connects and authenticates, retrying refused/closed attempts with backoff
  // (the server may not be up yet) until the connect timeout. Each attempt
  // has a short deadline of its own, so an address that drops packets is
  // retried like one that refuses; a run of refusals is reported while it
  // lasts (warn after kRefusedWarnAfter, then every kRefusedWarnEvery), not
  // only when the whole timeout is over.
  Fd connect() {
    const auto window = reached_ ? std::min<std::chrono::milliseconds>(opt_.connect_timeout, kReconnectWindow)
                                 : opt_.connect_timeout;
    const auto start = Clock::now();
    const auto deadline = detail::deadline_after(window);
    auto backoff = 10ms;
    std::string last = "no attempt";
    bool refused = false;
    auto warn_at = start + kRefusedWarnAfter;
    for (;;) {
      Fd fd = detail::try_connect(connect_host_, port_, std::min(deadline, Clock::now() + kAttemptTimeout), last,
                                  refused);
      if (fd.valid()) {
        if (std::optional<std::string> err = handshake(fd, deadline); !err) {
          reached_ = true;
          return fd;
        } else {
          last = *err;
        }
      }
      const auto now = Clock::now();
      if (refused && now >= warn_at && now < deadline) {
        COMM_WARN("store: nothing is listening at "
                  << where_ << " (connections refused for " << seconds_since(start)
                  << " s); retrying until the timeout of " << window.count() / 1000
                  << " s. Is rank 0 running, and do COMM_STORE (or MASTER_ADDR:MASTER_PORT) name its address?");
        warn_at = now + kRefusedWarnEvery;
      }
      if (server_exited())
        throw Error(ErrorCode::store_failure,
                    "store: rank 0 exited (pid " + std::to_string(opt_.server_pid) +
                        ", which hosts the store at " + where_ + ", is gone); this rank cannot meet the others");
      if (now >= deadline) break;
      std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));  // a last try at the deadline
      backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
    }
    if (refused)
      throw Error(ErrorCode::store_failure, "store: nothing is listening at " + where_ +
                                                ": every connection was refused for " +
                                                std::to_string(window.count()) +
                                                " ms; check COMM_STORE and that rank 0 is running");
    throw Error(ErrorCode::store_failure,
                "store: cannot reach the store at " + where_ + " within " + std::to_string(window.count()) +
                    " ms (last error: " + last + "); check COMM_STORE and that rank 0 is running");
  }

  static long long seconds_since(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - t).count();
  }

  // Returns an error to retry on, or throws when retrying cannot help.
  std::optional<std::string> handshake(const Fd& fd, Clock::time_point deadline) {
    char hello[4 + detail::wire::kHelloBytes];
    IoResult io = detail::recv_exact(fd.get(), hello, sizeof hello, deadline);
    if (io != IoResult::ok) return std::string("the server closed the connection before greeting");
    if (detail::wire::read_u32(hello) != detail::wire::kHelloBytes ||
        std::string_view(hello + 4, 4) != std::string_view(detail::wire::kMagic, 4) ||
        static_cast<std::uint8_t>(hello[8]) != detail::wire::kVersion)
      throw Error(ErrorCode::store_failure, "store: " + where_ +
                                                " did not greet like a comm TCP store of this version "
                                                "(another program on that port, or a mismatched comm build?)");
    const bool needs_token = hello[9] != 0;
    if (needs_token && opt_.token.empty())
      throw Error(ErrorCode::store_failure, "store: the store at " + where_ +
                                                " requires a token but this rank has none; set COMM_STORE_TOKEN "
                                                "to the job's token");
    if (!needs_token && !opt_.token.empty())
      throw Error(ErrorCode::store_failure,
                  "store: this rank has a token (COMM_STORE_TOKEN) but the store at " + where_ +
                      " was started without one: the ranks disagree about the token, or that is another job's "
                      "store");
    std::string digest;
    if (needs_token) {
      const auto d = detail::hmac_sha256(opt_.token, std::string_view(hello + 10, detail::wire::kNonceBytes));
      digest.assign(reinterpret_cast<const char*>(d.data()), d.size());
    }
    const bool said = opt_.rank >= 0 && opt_.world_size > 0;
    const std::string frame = detail::wire::Writer{}
                                  .u8(static_cast<std::uint8_t>(Op::auth))
                                  .str(digest)
                                  .u32(said ? static_cast<std::uint32_t>(opt_.rank) : detail::wire::kNoRank)
                                  .u32(said ? static_cast<std::uint32_t>(opt_.world_size) : 0)
                                  .u64(instance_)
                                  .finish();
    if (detail::send_all(fd.get(), frame.data(), frame.size(), deadline) != IoResult::ok)
      return std::string("the server closed the connection during authentication");
    char head[4];
    if (detail::recv_exact(fd.get(), head, 4, deadline) != IoResult::ok)
      return std::string("the server closed the connection during authentication");
    const std::uint32_t len = detail::wire::read_u32(head);
    if (len == 0 || len > 4096) throw malformed("connect");
    std::string reply(len, '\0');
    if (detail::recv_exact(fd.get(), reply.data(), len, deadline) != IoResult::ok)
      return std::string("the server closed the connection during authentication");
    if (static_cast<Status>(reply[0]) == Status::world_error) throw world_error(reply.substr(1));
    if (static_cast<Status>(reply[0]) != Status::ok)
      throw Error(ErrorCode::store_failure, "store: the store at " + where_ +
                                                " refused this rank's token: COMM_STORE_TOKEN differs from the "
                                                "one rank 0 uses");
    return std::nullopt;
  }

  TcpStoreOptions opt_;
  std::optional<detail::TcpStoreServer> server_;
  std::uint16_t port_ = 0;
  std::string connect_host_;
  std::string where_;
  std::atomic<bool> reached_{false};
  const std::uint64_t instance_ = random_instance();  // tells this object's connections from other clients'
  std::mutex mu_;
  std::vector<Fd> idle_;
};

}  // namespace

std::shared_ptr<Store> make_tcp_store(const TcpStoreOptions& options) {
  if (!options.is_server && options.port == 0)
    throw Error(ErrorCode::invalid_config,
                "TCP store client for host '" + options.host +
                    "' has port 0: a client needs the port the server (rank 0) listens on");
  if (options.host.empty() && options.bind.empty())
    throw Error(ErrorCode::invalid_config, "TCP store: no host given (TcpStoreOptions::host is empty)");
  return std::make_shared<TcpStore>(options);
}

std::uint16_t tcp_store_port(const Store& store) noexcept {
  const auto* tcp = dynamic_cast<const TcpStore*>(&store);
  return tcp ? tcp->port() : 0;
}

}  // namespace comm
