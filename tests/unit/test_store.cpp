// Stores: the same behaviour checks for memory, TCP and file stores, then the
// TCP server's defences (malformed frames, silent clients, tokens) and the
// file store's cleanup.

#include <comm/config.hpp>
#include <comm/error.hpp>
#include <comm/store.hpp>

#include <doctest/doctest.h>

#include "store_test_util.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace comm::test;
using comm::ErrorCode;
using comm::Store;

namespace {

std::string temp_dir(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("comm-test-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

// Behaviour every store must have. `a` and `b` are two handles on one store
// (two clients of one server, two openers of one directory, or the same object).
void check_basics(Store& a, Store& b) {
  a.set("k1", "v1");
  CHECK(b.get("k1", 1s) == "v1");
  CHECK(b.check("k1"));
  CHECK_FALSE(b.check("nope"));
  a.set("k1", "v2");
  CHECK(b.get("k1", 1s) == "v2");

  const std::string binary("a\0b\xff\n", 5);
  a.set("bin", binary);
  CHECK(b.get("bin", 1s) == binary);
  a.set("empty", "");
  CHECK(b.get("empty", 1s).empty());

  CHECK(a.add("ctr", 5) == 5);
  CHECK(b.add("ctr", -2) == 3);
  CHECK(a.get("ctr", 1s) == "3");

  CHECK(b.erase("k1"));
  CHECK_FALSE(a.check("k1"));
  CHECK_FALSE(a.erase("k1"));

  a.set("w1", "x");
  a.set("w2", "y");
  b.wait({"w1", "w2"}, 1s);
  b.wait({}, 1ms);
}

void check_timeouts(Store& s) {
  ErrorCode code{};
  auto t0 = Clock::now();
  std::string msg = error_of([&] { s.get("missing-key", 200ms); }, &code);
  auto took = Clock::now() - t0;
  CHECK(code == ErrorCode::timeout);
  CHECK(msg.find("missing-key") != std::string::npos);
  CHECK(took >= 190ms);
  CHECK(took < 5s);

  s.set("present", "1");
  msg = error_of([&] { s.wait({"present", "absent-1", "absent-2"}, 100ms); }, &code);
  CHECK(code == ErrorCode::timeout);
  CHECK(msg.find("absent-1") != std::string::npos);
  CHECK(msg.find("absent-2") != std::string::npos);
  CHECK(msg.find("'present'") == std::string::npos);
}

void check_blocking_get(Store& waiter, Store& setter) {
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    setter.set("late", "arrived");
  });
  const auto t0 = Clock::now();
  CHECK(waiter.get("late", 5s) == "arrived");
  CHECK(Clock::now() - t0 >= 90ms);
  t.join();
}

// Threads add to one counter and publish their own keys, then read everyone's.
void check_threads(const std::vector<Store*>& handles) {
  constexpr int kThreads = 8, kAdds = 100;
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      Store& s = *handles[static_cast<std::size_t>(t) % handles.size()];
      try {
        for (int i = 0; i < kAdds; ++i) s.add("threads/counter", 1);
        s.set("threads/" + std::to_string(t), std::to_string(t * t));
        for (int o = 0; o < kThreads; ++o)
          if (s.get("threads/" + std::to_string(o), 10s) != std::to_string(o * o)) ++bad;
      } catch (const std::exception& e) {
        MESSAGE(e.what());
        ++bad;
      }
    });
  }
  for (auto& t : ts) t.join();
  CHECK(bad == 0);
  CHECK(handles[0]->add("threads/counter", 0) == kThreads * kAdds);
}

}  // namespace

TEST_CASE("memory store: basics, timeouts, blocking get, threads") {
  auto s = comm::make_memory_store();
  check_basics(*s, *s);
  check_timeouts(*s);
  check_blocking_get(*s, *s);
  check_threads({s.get()});
  CHECK(comm::tcp_store_port(*s) == 0);
}

TEST_CASE("tcp store: basics across two clients of one server") {
  auto server = tcp_server();
  const std::uint16_t port = comm::tcp_store_port(*server);
  REQUIRE(port != 0);
  auto client = tcp_client(port);
  CHECK(comm::tcp_store_port(*client) == port);
  check_basics(*server, *client);
  check_timeouts(*client);
  check_blocking_get(*client, *server);
}

TEST_CASE("tcp store: many threads over several clients") {
  auto server = tcp_server();
  auto c1 = tcp_client(comm::tcp_store_port(*server));
  auto c2 = tcp_client(comm::tcp_store_port(*server));
  check_threads({server.get(), c1.get(), c2.get()});
}

TEST_CASE("tcp store: a parked get on one client does not hold up another") {
  auto server = tcp_server();
  auto waiter = tcp_client(comm::tcp_store_port(*server));
  auto other = tcp_client(comm::tcp_store_port(*server));
  std::string got;
  std::thread t([&] { got = waiter->get("release", 10s); });
  std::this_thread::sleep_for(50ms);
  check_still_serving(*other, "parked");
  other->set("release", "now");
  t.join();
  CHECK(got == "now");
}

TEST_CASE("tcp store: a client started before the server retries until it is up") {
  std::uint16_t port = 0;
  {
    auto probe = tcp_server();
    port = comm::tcp_store_port(*probe);
  }
  std::shared_ptr<Store> client;
  std::string err;
  std::thread t([&] {
    try {
      client = tcp_client(port, "", 5s);
    } catch (const std::exception& e) {
      err = e.what();
    }
  });
  std::this_thread::sleep_for(300ms);
  comm::TcpStoreOptions o;
  o.is_server = true;
  o.port = port;
  auto server = comm::make_tcp_store(o);
  t.join();
  REQUIRE_MESSAGE(client, err);
  server->set("k", "v");
  CHECK(client->get("k", 1s) == "v");
}

TEST_CASE("tcp store: no server is a store_failure after connect_timeout") {
  std::uint16_t port = 0;
  {
    auto probe = tcp_server();
    port = comm::tcp_store_port(*probe);
  }
  ErrorCode code{};
  const auto t0 = Clock::now();
  const std::string msg = error_of([&] { tcp_client(port, "", 300ms); }, &code);
  CHECK(code == ErrorCode::store_failure);
  CHECK(msg.find("nothing is listening at 127.0.0.1:" + std::to_string(port)) != std::string::npos);
  CHECK(Clock::now() - t0 >= 250ms);  // refusals are retried: rank 0 may start later
  CHECK(Clock::now() - t0 < 3s);
}

TEST_CASE("tcp store: a lost server is a store_failure, not a hang") {
  auto server = tcp_server();
  auto client = tcp_client(comm::tcp_store_port(*server), "", 500ms);
  client->set("a", "1");
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    server.reset();
  });
  ErrorCode code{};
  const auto t0 = Clock::now();
  const std::string msg = error_of([&] { client->get("never", 30s); }, &code);
  t.join();
  CHECK(code == ErrorCode::store_failure);
  CHECK(msg.find("lost the connection") != std::string::npos);
  CHECK(Clock::now() - t0 < 5s);
  code = {};
  error_of([&] { client->set("b", "2"); }, &code);
  CHECK(code == ErrorCode::store_failure);
}

TEST_CASE("tcp store: tokens") {
  auto server = tcp_server("secret-a");
  const std::uint16_t port = comm::tcp_store_port(*server);
  auto good = tcp_client(port, "secret-a");
  good->set("x", "1");
  CHECK(server->get("x", 1s) == "1");

  ErrorCode code{};
  std::string msg = error_of([&] { tcp_client(port, "secret-b"); }, &code);
  CHECK(code == ErrorCode::store_failure);
  CHECK(msg.find("token") != std::string::npos);

  msg = error_of([&] { tcp_client(port, ""); }, &code);
  CHECK(code == ErrorCode::store_failure);
  CHECK(msg.find("COMM_STORE_TOKEN") != std::string::npos);

  auto open = tcp_server();
  msg = error_of([&] { tcp_client(comm::tcp_store_port(*open), "secret-a"); }, &code);
  CHECK(code == ErrorCode::store_failure);
  CHECK(msg.find("token") != std::string::npos);

  // A raw client cannot skip authentication.
  const int fd = raw_connect(port);
  char hello[26];
  REQUIRE(::recv(fd, hello, sizeof hello, MSG_WAITALL) == 26);
  CHECK(hello[9] == 1);  // token required
  raw_send(fd, be32(9) + std::string("\x03\0\0\0\x01x", 6) + std::string(3, '\0'));  // a get
  CHECK(closed_by_peer(fd, 2s));
  ::close(fd);
  check_still_serving(*good, "after-skip");
}

TEST_CASE("tcp store: malformed frames close only the offending connection") {
  auto server = tcp_server();
  const std::uint16_t port = comm::tcp_store_port(*server);
  auto client = tcp_client(port);

  SUBCASE("garbage before authentication") {
    const int fd = raw_connect(port);
    raw_send(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(closed_by_peer(fd, 2s));
    ::close(fd);
  }
  SUBCASE("unknown request type") {
    const int fd = raw_authenticated(port);
    raw_send(fd, be32(3) + "\xff\xff\xff");
    CHECK(closed_by_peer(fd, 2s));
    ::close(fd);
  }
  SUBCASE("oversized length") {
    const int fd = raw_authenticated(port);
    raw_send(fd, be32(0xffffffffu));
    CHECK(closed_by_peer(fd, 2s));
    ::close(fd);
  }
  SUBCASE("key length beyond the frame") {
    const int fd = raw_authenticated(port);
    raw_send(fd, be32(9) + "\x02" + be32(1000) + "abcd");  // set, key claims 1000 bytes
    CHECK(closed_by_peer(fd, 2s));
    ::close(fd);
  }
  SUBCASE("truncated frame, then close") {
    const int fd = raw_authenticated(port);
    raw_send(fd, be32(100) + "\x02partial");
    ::close(fd);
  }
  check_still_serving(*client, "after-malformed");
  check_still_serving(*server, "after-malformed-2");
}

TEST_CASE("tcp store: a silent client does not block anyone") {
  auto server = tcp_server("tok");
  const std::uint16_t port = comm::tcp_store_port(*server);
  const int silent = raw_connect(port);        // never reads or writes
  const int half = raw_connect(port);
  raw_send(half, be32(40) + "\x01");           // starts an auth frame, never finishes it
  auto client = tcp_client(port, "tok");
  check_still_serving(*client, "silent");
  std::thread t([&] { client->wait({"from-server"}, 5s); });
  server->set("from-server", "1");
  t.join();
  ::close(silent);
  ::close(half);
}

TEST_CASE("tcp store: at max_connections new clients wait for a free slot") {
  comm::TcpStoreOptions o;
  o.is_server = true;
  o.max_connections = 3;  // the server's own client holds one
  auto server = comm::make_tcp_store(o);
  const std::uint16_t port = comm::tcp_store_port(*server);
  const int a = raw_connect(port);
  const int b = raw_connect(port);
  std::shared_ptr<Store> late;
  std::string err;
  std::atomic<bool> connected{false};
  const auto t0 = Clock::now();
  std::thread t([&] {
    try {
      late = tcp_client(port, "", 5s);
      connected = true;
    } catch (const std::exception& e) {
      err = e.what();
    }
  });
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(connected);  // still waiting for a slot
  ::close(a);
  t.join();
  REQUIRE_MESSAGE(late, err);
  CHECK(Clock::now() - t0 >= 250ms);
  late->set("k", "v");
  CHECK(server->get("k", 1s) == "v");
  ::close(b);
}

TEST_CASE("tcp store: oversized keys and values are refused on the client") {
  comm::TcpStoreOptions o;
  o.is_server = true;
  o.max_key_bytes = 16;
  o.max_value_bytes = 64;
  auto s = comm::make_tcp_store(o);
  ErrorCode code{};
  error_of([&] { s->set(std::string(17, 'k'), "v"); }, &code);
  CHECK(code == ErrorCode::invalid_argument);
  error_of([&] { s->set("k", std::string(65, 'v')); }, &code);
  CHECK(code == ErrorCode::invalid_argument);
  s->set(std::string(16, 'k'), std::string(64, 'v'));
  CHECK(s->get(std::string(16, 'k'), 1s) == std::string(64, 'v'));
}

TEST_CASE("file store: basics, timeouts, blocking get, threads, cleanup") {
  const std::string dir = temp_dir("basic");
  std::filesystem::remove_all(dir);
  {
    auto a = comm::make_file_store(dir);
    {
      auto b = comm::make_file_store(dir);
      check_basics(*a, *b);
      check_timeouts(*b);
      check_blocking_get(*a, *b);
      check_threads({a.get(), b.get()});
      a->set(std::string(300, 'L') + "/with/slashes", "long");
      CHECK(b->get(std::string(300, 'L') + "/with/slashes", 1s) == "long");
      a->set("..", "dots");
      CHECK(b->get("..", 1s) == "dots");
    }
    CHECK(std::filesystem::exists(dir));  // `a` still has it open
    CHECK(a->get("w1", 1s) == "x");
  }
  CHECK_FALSE(std::filesystem::exists(dir));
}

TEST_CASE("file store: a directory that existed before keeps what was not ours") {
  const std::string dir = temp_dir("pre");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/user-file") << "keep me";
  {
    auto s = comm::make_file_store(dir);
    s->set("k", "v");
    s->add("n", 1);
  }
  CHECK(std::filesystem::exists(dir + "/user-file"));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  CHECK(entries == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("make_store picks the store from the config") {
  comm::Config c;
  ErrorCode code{};
  for (const char* bad : {"", "file:", "nohost", "host:99999", "host:port", ":123", "[::1:5"}) {
    c.store = bad;
    code = {};
    const std::string msg = error_of([&] { comm::make_store(c); }, &code);
    CHECK_MESSAGE(code == ErrorCode::invalid_config, bad);
    CHECK(msg.find("COMM_STORE") != std::string::npos);
  }
  c.rank = 1;
  c.world_size = 2;
  c.store = "127.0.0.1:0";
  code = {};
  error_of([&] { comm::make_store(c); }, &code);
  CHECK(code == ErrorCode::invalid_config);

  c.rank = 0;
  c.store_token = "t";
  auto server = comm::make_store(c);
  const std::uint16_t port = comm::tcp_store_port(*server);
  CHECK(port != 0);
  c.rank = 1;
  c.store = "127.0.0.1:" + std::to_string(port);
  auto client = comm::make_store(c);
  client->set("via-config", "ok");
  CHECK(server->get("via-config", 1s) == "ok");

  const std::string dir = temp_dir("factory");
  c.store = "file:" + dir;
  {
    auto f = comm::make_store(c);
    f->set("k", "v");
    CHECK(f->get("k", 1s) == "v");
    CHECK(std::filesystem::exists(dir));
  }
  CHECK_FALSE(std::filesystem::exists(dir));
}
