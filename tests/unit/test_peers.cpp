// The peer table: host identity, hosts as groups of ranks, the exchange, and
// the default transport it implies.

#include "core/link_exchange.hpp"
#include "core/peer_table.hpp"
#include "forked_child.hpp"
#include "local_group.hpp"

#include <comm/comm.hpp>
#include <doctest/doctest.h>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

using comm::PeerInfo;
using comm::PeerTable;

namespace {

PeerTable table_of(std::vector<std::pair<std::string, std::int64_t>> host_pid) {
  PeerTable t;
  for (auto& [host, pid] : host_pid) {
    PeerInfo p;
    p.host = host;
    p.hostname = "name-of-" + host;
    p.pid = pid;
    t.peers.push_back(p);
  }
  t.index_hosts();
  return t;
}

}  // namespace

TEST_CASE("peer table: host identity is stable, one line, and starts with the hostname") {
  const std::string id = comm::host_identity();
  CHECK(id == comm::host_identity());
  CHECK(id.find('\n') == std::string::npos);
  char name[256] = {};
  REQUIRE(::gethostname(name, sizeof name - 1) == 0);
  CHECK(id.rfind(std::string(name) + "|", 0) == 0);
}

TEST_CASE("peer table: another network namespace is another host") {
  // Emulated hosts and containers have their own network namespace; ranks in
  // them cannot meet over this loopback, so they must not count as one host.
  const comm::test::ForkedChild child = comm::test::run_forked([](int fd) {
    const std::string id = ::unshare(CLONE_NEWNET) == 0 ? comm::host_identity() : std::string("EPERM");
    return ::write(fd, id.data(), id.size()) == static_cast<ssize_t>(id.size()) ? 0 : 1;
  });
  REQUIRE(WIFEXITED(child.status));
  const std::string& other = child.output;
  if (other == "EPERM") {
    MESSAGE("skipped: cannot create a network namespace here (not root?)");
    return;
  }
  const std::string mine = comm::host_identity();
  CHECK(other != mine);
  // Same kernel and hostname: only the namespace part differs.
  CHECK(other.substr(0, other.rfind('|')) == mine.substr(0, mine.rfind('|')));
}

TEST_CASE("peer table: hosts group ranks in rank order, hosts ordered by their lowest rank") {
  const PeerTable t = table_of({{"b", 10}, {"a", 11}, {"b", 12}, {"c", 13}, {"a", 14}, {"b", 10}});
  REQUIRE(t.num_hosts() == 3);
  CHECK(t.hosts[0] == std::vector<int>{0, 2, 5});
  CHECK(t.hosts[1] == std::vector<int>{1, 4});
  CHECK(t.hosts[2] == std::vector<int>{3});
  CHECK(t[5].host_index == 0);
  CHECK(t[5].local_rank == 2);
  CHECK(t[4].local_rank == 1);
  CHECK(t[3].local_rank == 0);
  CHECK(t.same_host(0, 5));
  CHECK_FALSE(t.same_host(0, 1));
  CHECK(t.same_process(0, 5));   // same host, same pid: threads of one process
  CHECK_FALSE(t.same_process(0, 2));
  CHECK(t.host_ranks(4) == std::vector<int>{1, 4});
  CHECK_FALSE(t.one_process());
  CHECK(t.describe() ==
        "host 0 (name-of-b): ranks 0, 2, 5\nhost 1 (name-of-a): ranks 1, 4\nhost 2 (name-of-c): rank 3\n");
  CHECK(table_of({{"x", 7}, {"x", 7}}).one_process());
}

TEST_CASE("peer table: a pid means something only on the same host in the same pid namespace") {
  PeerTable t = table_of({{"a", 10}, {"a", 11}, {"a", 12}, {"b", 13}});
  for (PeerInfo& p : t.peers) p.pid_namespace = "pid:[1]";
  t.peers[2].pid_namespace = "pid:[2]";  // a container sharing the host's network
  CHECK(t.pid_visible(0, 1));
  CHECK_FALSE(t.pid_visible(0, 2));
  CHECK_FALSE(t.pid_visible(0, 3));
  t.peers[1].pid_namespace.clear();  // unreadable: never trusted
  t.peers[0].pid_namespace.clear();
  CHECK_FALSE(t.pid_visible(0, 1));
}

TEST_CASE("peer table: entries round-trip through the store format; a malformed one names its rank") {
  PeerInfo p;
  p.host = "node7|boot|net:[4026531840]";
  p.hostname = "node7";
  p.pid = 123456789012;
  p.device = 3;
  p.start_ticks = 987654321;
  p.pid_namespace = "pid:[4026531836]";
  const PeerInfo q = comm::detail::parse_peer(comm::detail::serialize_peer(p), 5);
  CHECK(q.host == p.host);
  CHECK(q.hostname == p.hostname);
  CHECK(q.pid == p.pid);
  CHECK(q.device == 3);
  CHECK(q.start_ticks == 987654321);
  CHECK(q.pid_namespace == "pid:[4026531836]");
  try {
    comm::detail::parse_peer("node7\nnode7\nnot-a-pid\n-1\n0\npid:[1]\n", 5);
    FAIL("a malformed entry was accepted");
  } catch (const comm::Error& e) {
    CHECK(std::string(e.what()).find("rank 5") != std::string::npos);
  }
}

TEST_CASE("link rows round-trip through the store format, transfer curves included; a cut one names its rank") {
  comm::LinkInfo curved{comm::LinkKind::tcp, 12.5, 3.25, "a transport's own, with spaces"};
  curved.rndv_threshold_bytes = 16384;
  curved.rndv_extra_us = 8.75;
  curved.beta_large_gbps = 1.5;
  curved.receiver_copies = true;
  curved.transfer_curve = {{8, 0.0}, {65536, 11.25}, {1048576, 370.125}};
  const std::vector<comm::LinkInfo> row{{comm::LinkKind::self, 0.0, 1e3, "self"}, curved,
                                        {comm::LinkKind::shm, 0.3, 8.0, ""}};
  comm::LinkMatrix m;
  m.n = 3;
  m.links.resize(9);
  comm::detail::parse_links(comm::detail::serialize_links(row), 1, m);
  for (int p = 0; p < 3; ++p) {
    CAPTURE(p);
    const comm::LinkInfo& want = row[static_cast<std::size_t>(p)];
    const comm::LinkInfo& got = m.at(1, p);
    CHECK(got.kind == want.kind);
    CHECK(got.alpha_us == want.alpha_us);
    CHECK(got.beta_gbps == want.beta_gbps);
    CHECK(got.rndv_threshold_bytes == want.rndv_threshold_bytes);
    CHECK(got.rndv_extra_us == want.rndv_extra_us);
    CHECK(got.beta_large_gbps == want.beta_large_gbps);
    CHECK(got.receiver_copies == want.receiver_copies);
    CHECK(got.transfer_curve == want.transfer_curve);
    CHECK(got.detail == want.detail);
  }
  std::string cut = comm::detail::serialize_links({curved});
  cut = cut.substr(0, cut.find(" 65536"));  // the curve says 3 points and holds 1
  m.n = 1;
  m.links.resize(1);
  try {
    comm::detail::parse_links(cut, 0, m);
    FAIL("a row with a cut transfer curve was accepted");
  } catch (const comm::Error& e) {
    CHECK(std::string(e.what()).find("malformed link row from rank 0") != std::string::npos);
  }
}

TEST_CASE("peer table: ranks as threads form one host and one process, and default to local") {
  comm::test::run_local(4, [](comm::Communicator& c) {
    const PeerTable& t = c.peers();
    CHECK(t.size() == 4);
    CHECK(t.num_hosts() == 1);
    CHECK(t.one_process());
    CHECK(t[c.rank()].local_rank == c.rank());
    CHECK(t[c.rank()].pid == ::getpid());
    CHECK(t[c.rank()].start_ticks > 0);
    CHECK(t.pid_visible(c.rank(), (c.rank() + 1) % 4));
    CHECK(c.transport_name() == "local");
  });
}
