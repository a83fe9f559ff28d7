// UCX transport internals: lane parsing and link classification (from the
// text UCX 1.13's ucp_ep_print_info writes), plus two transports in one
// process over shared memory. Built only when UCX is enabled.
#include "transports/ucx/ucx_transport.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <future>
#include <string>
#include <vector>

using comm::LinkKind;
using comm::ucx::classify_link;
using comm::ucx::parse_lane_names;

namespace {

// Abridged ucp_ep_print_info output, as UCX 1.13.1 prints it.
const char* const kShmInfo =
    "#\n# UCP endpoint \n#\n#               peer: <no debug data>\n"
    "#                 lane[0]:  3:sysv/memory.0 md[2]           -> md[2]/sysv/sysdev[255] am am_bw#0 keepalive\n"
    "#\n#                tag_send: 0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)\n";
const char* const kTcpInfo =
    "#                 lane[0]:  0:tcp/lo.0 md[0]                -> md[0]/tcp/sysdev[255] am am_bw#0 keepalive wireup\n";
const char* const kIbInfo =
    "#                 lane[0]:  4:rc_mlx5/mlx5_0:1.0 md[1]      -> md[1]/ib/sysdev[255] rma_bw#0 am am_bw#0\n"
    "#                 lane[1]:  5:ud_mlx5/mlx5_0:1.0 md[1]      -> md[1]/ib/sysdev[255] wireup keepalive\n"
    "#                 lane[2]:  4:rc_mlx5/mlx5_0:1.0 md[1]      -> md[1]/ib/sysdev[255] rma_bw#1\n";
const char* const kMixedInfo =
    "#                 lane[0]:  1:posix/memory.0 md[0]  -> md[0]/posix am am_bw#0\n"
    "#                 lane[1]:  2:cma/memory.0 md[1]    -> md[1]/cma rma_bw#0\n"
    "#                 lane[2]:  4:rc_mlx5/mlx5_0:1.0 md[2] -> md[2]/ib rma_bw#1\n";

}  // namespace

TEST_CASE("ucx: lane names from ucp_ep_print_info") {
  CHECK(parse_lane_names(kShmInfo) == std::vector<std::string>{"sysv/memory"});
  CHECK(parse_lane_names(kTcpInfo) == std::vector<std::string>{"tcp/lo"});
  // Duplicates collapse; the device keeps its port suffix.
  CHECK(parse_lane_names(kIbInfo) == std::vector<std::string>{"rc_mlx5/mlx5_0:1", "ud_mlx5/mlx5_0:1"});
  CHECK(parse_lane_names(kMixedInfo) ==
        std::vector<std::string>{"posix/memory", "cma/memory", "rc_mlx5/mlx5_0:1"});
  CHECK(parse_lane_names("").empty());
  CHECK(parse_lane_names("# lane[0]: garbage\n").empty());
}

TEST_CASE("ucx: link kind from the lanes") {
  const auto shm = classify_link(true, {"sysv/memory"});
  CHECK(shm.kind == LinkKind::shm);
  CHECK(shm.detail == "ucx sysv/memory");
  CHECK(shm.alpha_us == doctest::Approx(0.65));
  CHECK(shm.beta_gbps == doctest::Approx(7.5));

  const auto tcp = classify_link(true, {"tcp/lo"});  // same host, but UCX chose tcp
  CHECK(tcp.kind == LinkKind::tcp);
  CHECK(tcp.detail == "ucx tcp/lo");
  CHECK(tcp.alpha_us == doctest::Approx(10.0));

  const auto ib = classify_link(false, {"rc_mlx5/mlx5_0:1", "ud_mlx5/mlx5_0:1"});
  CHECK(ib.kind == LinkKind::ib);
  CHECK(ib.detail == "ucx rc_mlx5/mlx5_0:1 + ud_mlx5/mlx5_0:1");

  // Shared memory carries small messages when present, whatever else there is.
  CHECK(classify_link(true, {"posix/memory", "cma/memory", "rc_mlx5/mlx5_0:1"}).kind == LinkKind::shm);
  // Unknown lanes: fall back on whether the peer shares the host.
  CHECK(classify_link(true, {"foo/bar"}).kind == LinkKind::shm);
  CHECK(classify_link(false, {}).kind == LinkKind::tcp);
}

TEST_CASE("ucx: two transports in one process exchange messages over shared memory") {
  ::setenv("UCX_TLS", "shm", 1);  // this binary's own environment; keeps it off the network
  auto store = comm::make_memory_store();
  comm::Config cfg;
  cfg.timeout = std::chrono::milliseconds(20'000);
  auto make = [&](int rank) {
    comm::TransportInit init;
    init.rank = rank;
    init.size = 2;
    init.store = store;
    init.config = &cfg;
    return comm::create_transport("ucx", init);
  };
  auto other = std::async(std::launch::async, make, 1);
  auto t0 = make(0);
  auto t1 = other.get();
  CHECK(t0->link(0).kind == LinkKind::self);
  CHECK(t0->link(1).kind == LinkKind::shm);
  CHECK(t1->link(0).detail.find("memory") != std::string::npos);

  const std::vector<int> sent{1, 2, 3, 5, 8, 13};
  std::vector<int> got(sent.size() + 1, -1);  // one spare slot: must stay untouched
  comm::Completion s, r;
  t1->irecv(0, 42, got.data(), got.size() * sizeof(int), r);
  t0->isend(1, 42, sent.data(), sent.size() * sizeof(int), s);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((s.is_pending() || r.is_pending()) && std::chrono::steady_clock::now() < deadline) {
    t0->progress();
    t1->progress();
  }
  REQUIRE(s.state == comm::Completion::done);
  REQUIRE(r.state == comm::Completion::done);
  CHECK(r.bytes == sent.size() * sizeof(int));
  CHECK(std::vector<int>(got.begin(), got.begin() + 6) == sent);
  CHECK(got.back() == -1);

  // A tag outside 48 bits or a peer outside the group is a usage error.
  comm::Completion bad;
  CHECK_THROWS_AS(t0->isend(1, std::uint64_t{1} << 48, sent.data(), 4, bad), comm::Error);
  CHECK_THROWS_AS(t0->irecv(2, 1, got.data(), 4, bad), comm::Error);
}
