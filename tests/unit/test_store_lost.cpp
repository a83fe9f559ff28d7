// Dead store clients: the TCP store server records a client rank whose
// connection closes without a goodbye (comm/lost), not one that destroys its
// store; the communicator's watchful waits end at once naming a rank that
// died or published its failure, and name the key's owner when they expire.

#include "bootstrap/store_keys.hpp"
#include "bootstrap/store_tcp_wire.hpp"
#include "util/socket_util.hpp"
#include "core/peer_notes.hpp"
#include "core/watchful_store.hpp"

#include <comm/error.hpp>
#include <comm/store.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <unistd.h>
#include <vector>
#include <functional>
#include <string>
#include <thread>

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

std::shared_ptr<comm::Store> server() {
  comm::TcpStoreOptions o;
  o.is_server = true;
  o.port = 0;
  o.rank = 0;
  return comm::make_tcp_store(o);
}

// Every client of these tests claims a rank of one world of this size.
constexpr int kWorld = 8;

comm::TcpStoreOptions client_options(const comm::Store& server, int rank) {
  comm::TcpStoreOptions o;
  o.port = comm::tcp_store_port(server);
  o.rank = rank;
  o.world_size = kWorld;
  o.connect_timeout = 5s;
  return o;
}

// A client that connects as `rank`, sets `key`, and closes its connection
// without the goodbye a destroyed store sends (as a killed rank would).
// Spoken by hand (bootstrap/store_tcp_wire.hpp): the real client always says it.
void client_that_vanishes(const comm::Store& server, int rank, const std::string& key) {
  namespace wire = comm::detail::wire;
  std::string last;
  bool refused = false;
  const auto deadline = Clock::now() + 5s;
  comm::detail::Fd fd =
      comm::detail::try_connect("127.0.0.1", comm::tcp_store_port(server), deadline, last, refused);
  REQUIRE(fd.valid());
  char hello[4 + wire::kHelloBytes];
  REQUIRE(comm::detail::recv_exact(fd.get(), hello, sizeof hello, deadline) == comm::detail::IoResult::ok);
  const auto exchange = [&](const std::string& frame) {
    REQUIRE(comm::detail::send_all(fd.get(), frame.data(), frame.size(), deadline) == comm::detail::IoResult::ok);
    char head[4];
    REQUIRE(comm::detail::recv_exact(fd.get(), head, 4, deadline) == comm::detail::IoResult::ok);
    std::string reply(wire::read_u32(head), '\0');
    REQUIRE(comm::detail::recv_exact(fd.get(), reply.data(), reply.size(), deadline) == comm::detail::IoResult::ok);
    REQUIRE(reply[0] == static_cast<char>(wire::Status::ok));
  };
  const bool said = rank >= 0;
  exchange(wire::Writer{}
               .u8(static_cast<std::uint8_t>(wire::Op::auth))
               .str("")
               .u32(said ? static_cast<std::uint32_t>(rank) : wire::kNoRank)
               .u32(said ? kWorld : 0)
               .u64(0x5eed0000u + static_cast<std::uint64_t>(rank + 1))  // this client's instance
               .finish());
  exchange(wire::Writer{}.u8(static_cast<std::uint8_t>(wire::Op::set)).str(key).str("1").finish());
}

std::string error_of(const std::function<void()>& fn, comm::ErrorCode* code = nullptr) {
  try {
    fn();
  } catch (const comm::Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return {};
}

bool lost_within(comm::Store& s, int rank, std::chrono::milliseconds budget) {
  const auto end = Clock::now() + budget;
  while (Clock::now() < end) {
    if (s.check(comm::detail::lost_rank_key(rank))) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

}  // namespace

TEST_CASE("store server: a client that vanishes is recorded lost; one that leaves is not") {
  auto s = server();
  { auto polite = comm::make_tcp_store(client_options(*s, 1)); polite->set("x/1", "1"); }
  client_that_vanishes(*s, 2, "x/2");
  REQUIRE(lost_within(*s, 2, 2s));
  CHECK(s->get(std::string(comm::detail::kLostRanksKey), 1s) == "2 ");
  CHECK(s->get(comm::detail::lost_rank_key(2), 1s).find("closed without a goodbye") != std::string::npos);
  CHECK_FALSE(s->check(comm::detail::lost_rank_key(1)));
  // A client without a rank is never recorded.
  client_that_vanishes(*s, -1, "x/none");
  std::this_thread::sleep_for(100ms);
  CHECK(s->get(std::string(comm::detail::kLostRanksKey), 1s) == "2 ");
}

TEST_CASE("watchful store: a wait for a dead rank's key ends at once, naming it") {
  auto s = server();
  auto ns = comm::make_prefix_store(s, "c1/");
  auto w = comm::detail::make_watchful_store(ns, s, 0, {0, 1, 2});
  std::thread killer([&] {
    std::this_thread::sleep_for(200ms);
    client_that_vanishes(*s, 2, "other");
  });
  comm::ErrorCode code{};
  const auto t0 = Clock::now();
  const std::string msg = error_of([&] { w->get("peer/2", 30s); }, &code);
  killer.join();
  CHECK(code == comm::ErrorCode::peer_failed);
  CHECK(msg.find("rank 2 died") != std::string::npos);
  CHECK(Clock::now() - t0 < 3s);
}

TEST_CASE("watchful store: split ranks are named as the communicator numbers them") {
  auto s = server();
  auto w = comm::detail::make_watchful_store(comm::make_prefix_store(s, "c1/split0/1/c1/"), s, 0, {1, 3});
  client_that_vanishes(*s, 3, "other");
  REQUIRE(lost_within(*s, 3, 2s));
  const std::string msg = error_of([&] { w->wait({"peer/1"}, 30s); });
  CHECK(msg.find("rank 1 (rank 3 of the job) died") != std::string::npos);
  // A lost rank outside the communicator does not end its waits.
  auto other = comm::detail::make_watchful_store(comm::make_prefix_store(s, "c2/"), s, 0, {0, 1});
  comm::ErrorCode code{};
  error_of([&] { other->get("peer/1", 500ms); }, &code);
  CHECK(code == comm::ErrorCode::timeout);
}

TEST_CASE("watchful store: a published failure ends the wait and blames its cause") {
  auto mem = comm::make_memory_store();
  auto w = comm::detail::make_watchful_store(mem, nullptr, 0, {0, 1, 2});
  comm::detail::publish_failure(mem, 1, comm::ErrorCode::peer_failed, "rank 2 died under me", 2, 1s);
  comm::ErrorCode code{};
  const std::string msg = error_of([&] { w->get("peer/2", 30s); }, &code);
  CHECK(code == comm::ErrorCode::peer_failed);
  CHECK(msg.find("rank 2 failed (as rank 1 reports): rank 2 died under me") != std::string::npos);
}

TEST_CASE("watchful store: an expired wait names the rank that should have set the key") {
  auto w = comm::detail::make_watchful_store(comm::make_memory_store(), nullptr, 0, {0, 1, 2, 3});
  comm::ErrorCode code{};
  const std::string msg = error_of([&] { w->wait({"ucx/addr/3", "ucx/addr/1"}, 300ms); }, &code);
  CHECK(code == comm::ErrorCode::timeout);
  CHECK(msg.find("rank 3, rank 1 have not joined") != std::string::npos);
  CHECK(comm::detail::key_rank("c1/ofi/host/12") == 12);
  CHECK_FALSE(comm::detail::key_rank("c1/tuning/agreed").has_value());
}

namespace {

// A store whose server is gone: every request fails as the TCP client's do then.
class GoneStore final : public comm::Store {
 public:
  void set(const std::string&, const std::string&) override { gone(); }
  std::string get(const std::string&, std::chrono::milliseconds) override { gone(); }
  void wait(const std::vector<std::string>&, std::chrono::milliseconds) override { gone(); }
  std::int64_t add(const std::string&, std::int64_t) override { gone(); }
  bool check(const std::string&) override { gone(); }
  bool erase(const std::string&) override { gone(); }

 private:
  [[noreturn]] static void gone() {
    throw comm::Error(comm::ErrorCode::store_failure, "store check: lost the connection to the store (connection closed)");
  }
};

}  // namespace

TEST_CASE("culprit: with the store gone, the launcher's note of a death comes before blaming the store's host") {
  char tmpl[] = "/tmp/comm-exit-notes-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  ::setenv("COMM_EXIT_NOTES", dir.c_str(), 1);
  auto store = std::make_shared<GoneStore>();
  const std::vector<int> root_ranks{0, 1, 2, 3, 4};
  // No note: the store's host (rank 0) is all there is to blame.
  comm::detail::Culprit none = comm::detail::find_culprit(store, nullptr, root_ranks, 1, {4}, 200ms);
  CHECK(none.source == comm::detail::Culprit::Source::store_gone);
  CHECK(none.rank == 0);
  // The launcher saw rank 4 killed: rank 4 it is, although the store is gone too.
  {
    std::FILE* f = std::fopen((dir + "/4").c_str(), "w");
    REQUIRE(f);
    std::fputs("1 rank 4 was killed by signal SIGKILL (9)\n", f);
    std::fclose(f);
  }
  comm::detail::Culprit c = comm::detail::find_culprit(store, nullptr, root_ranks, 1, {4}, 200ms);
  CHECK(c.source == comm::detail::Culprit::Source::launcher);
  CHECK(c.rank == 4);
  CHECK(c.reason.find("rank 4 was killed") != std::string::npos);
  ::unsetenv("COMM_EXIT_NOTES");
  std::remove((dir + "/4").c_str());
  ::rmdir(dir.c_str());
}
