// Transport `auto`: the per-pair plan (preferences, overrides, what is
// missing), failure messages in the group's rank numbers, and the composite
// itself in one process: threads posing as two hosts, `local` inside each
// host and a network transport between them, running real collectives.

#include "core/peer_table.hpp"
#include "local_group.hpp"
#include "transports/auto/auto_transport.hpp"

#include <comm/comm.hpp>

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

using namespace comm;

namespace {

PeerTable table(const std::vector<std::pair<std::string, std::int64_t>>& host_pid) {
  PeerTable t;
  for (const auto& [host, pid] : host_pid) {
    PeerInfo p;
    p.host = p.hostname = host;
    p.pid = pid;
    t.peers.push_back(p);
  }
  t.index_hosts();
  return t;
}

// Availability of a build with exactly `have`.
auto only(std::set<std::string> have) {
  return [have](std::string_view t) { return have.count(std::string(t)) ? std::string() : "not in this build"; };
}

}  // namespace

TEST_CASE("auto plan: the network between hosts, shared memory or threads inside") {
  const PeerTable two_hosts = table({{"a", 1}, {"a", 2}, {"b", 3}, {"b", 4}});
  autotp::Plan p = autotp::plan_auto(two_hosts, Config{}, only({"local", "shm", "ucx", "ofi", "gloo"}));
  CHECK(p.inter == "ucx");
  CHECK(p.intra == std::vector<std::string>{"shm", "shm"});
  CHECK(p.inter_why.find("on different hosts: first available of ucx, ofi, gloo") != std::string::npos);
  // Without shm and UCX: ofi everywhere, and the reason says what was skipped.
  p = autotp::plan_auto(two_hosts, Config{}, only({"local", "ofi", "gloo"}));
  CHECK(p.inter == "ofi");
  CHECK(p.intra == std::vector<std::string>{"ofi", "ofi"});
  CHECK(p.intra_why[0].find("shm: not in this build; ucx: not in this build") != std::string::npos);
  // Threads of one process on a host talk through memory; a host of one rank needs nothing inside.
  p = autotp::plan_auto(table({{"a", 7}, {"a", 7}, {"b", 8}}), Config{}, only({"local", "ucx"}));
  CHECK(p.intra == std::vector<std::string>{"local", ""});
  // One host: no inter-host transport at all.
  p = autotp::plan_auto(table({{"a", 1}, {"a", 2}}), Config{}, only({"local", "gloo"}));
  CHECK(p.inter.empty());
  CHECK(p.intra == std::vector<std::string>{"gloo"});
}

TEST_CASE("auto plan: COMM_AUTO_INTRA / COMM_AUTO_INTER name the transports; what cannot work is an error") {
  const PeerTable two_hosts = table({{"a", 1}, {"a", 2}, {"b", 3}});
  Config cfg;
  cfg.transport_options["auto.intra"] = "gloo";
  cfg.transport_options["auto.inter"] = "ofi";
  autotp::Plan p = autotp::plan_auto(two_hosts, cfg, only({"ucx", "ofi", "gloo"}));
  CHECK(p.inter == "ofi");
  CHECK(p.intra[0] == "gloo");
  CHECK(p.inter_why == "named by COMM_AUTO_INTER");
  cfg.transport_options["auto.inter"] = "mpi";
  try {
    autotp::plan_auto(two_hosts, cfg, only({"ucx"}));
    FAIL("an unavailable auto.inter was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_config);
    CHECK(std::string(e.what()).find("COMM_AUTO_INTER (transport option auto.inter) names 'mpi'") != std::string::npos);
  }
  try {
    autotp::plan_auto(two_hosts, Config{}, only({"local"}));
    FAIL("hosts without a network transport were accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::unknown_transport);
    CHECK(std::string(e.what()).find("on different hosts (ucx: not in this build; ofi:") != std::string::npos);
  }
  // Without options the environment names them (COMM_AUTO_INTRA / COMM_AUTO_INTER).
  ::setenv("COMM_AUTO_INTRA", "ucx", 1);
  ::setenv("COMM_AUTO_INTER", "gloo", 1);
  p = autotp::plan_auto(two_hosts, Config{}, only({"ucx", "gloo"}));
  ::unsetenv("COMM_AUTO_INTRA");
  ::unsetenv("COMM_AUTO_INTER");
  CHECK(p.intra[0] == "ucx");
  CHECK(p.inter == "gloo");
}

TEST_CASE("auto: a per-host transport's failures speak the group's rank numbers") {
  const std::string m = autotp::translate_ranks("ucx recv from rank 1 (tag 7): rank 0 failed; rank x", {4, 6},
                                                "auto's 'ucx' inside host 1");
  CHECK(m == "ucx recv from rank 6 (tag 7): rank 4 failed; rank x (via auto's 'ucx' inside host 1)");
}

namespace {

void two_fake_hosts(const std::string& inter) {
  detail::set_host_override_for_tests([](const Config& c) { return c.rank < 2 ? "host-a" : "host-b"; });
  Config cfg;
  cfg.transport = "auto";
  cfg.transport_options["auto.inter"] = inter;
  cfg.iface = "127.0.0.1";
  try {
    test::run_local(4, cfg, [&](Communicator& c) {
      CHECK(c.transport_name() == "auto");
      for (int p = 0; p < 4; ++p) {
        const std::string d = c.link(c.rank(), p).detail;
        CHECK_MESSAGE(d.rfind(c.peers().same_host(c.rank(), p) ? "auto: local" : "auto: " + inter, 0) == 0, d);
      }
      for (const char* algo : {"ring", "hierarchical", "hierarchical_rail", "direct"}) {
        std::vector<float> x(1000, static_cast<float>(c.rank() + 1));
        CallOptions o;
        o.algorithm = algo;
        c.allreduce(view(x), ReduceOp::sum, o);
        CHECK_MESSAGE(x[999] == 10.0f, algo);
      }
      std::vector<std::int32_t> all(4);
      std::int32_t mine = c.rank() * 10;
      c.allgather(ConstView{&mine, 1, DataType::i32}, view(all));
      CHECK(all == std::vector<std::int32_t>{0, 10, 20, 30});
      c.barrier();
    });
  } catch (...) {
    detail::set_host_override_for_tests(nullptr);
    throw;
  }
  detail::set_host_override_for_tests(nullptr);
}

}  // namespace

TEST_CASE("auto: threads posing as two hosts run collectives over local inside and a network between") {
  int ran = 0;
  for (const std::string inter : {"ucx", "gloo", "ofi"}) {
    if (!transport_unavailable_reason(inter).empty()) continue;
    INFO("between hosts: ", inter);
    ++ran;
    two_fake_hosts(inter);
  }
  if (ran == 0) MESSAGE("skipped: this build has no network transport");
}
