// comm-gloo-timeout: rank 1 never calls the collective; rank 0 must get
// comm::Error(timeout) at the configured timeout, its communicator must then
// be failed, and the next call must fail fast.
//
//   COMM_TRANSPORT=gloo COMM_TIMEOUT=2 commrun -n 2 comm-gloo-timeout <algorithm>
//
// Two ranks only: after a timeout this rank cancels its operations, and a Gloo
// operation can only be withdrawn by closing the connections, so a third rank
// still waiting would see "connection closed" (peer_failed) instead of its own
// timeout, depending on which deadline passes first.
//
// Exit status: 0 pass, 1 fail, 77 skipped (no Gloo in this build).
#include "mp_test_util.hpp"

#include <comm/comm.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

using mptest::fail;
using namespace std::chrono_literals;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: comm-gloo-timeout <algorithm>   (under commrun -n 2, COMM_TRANSPORT=gloo)\n");
    return 2;
  }
  const std::string algorithm = argv[1];
  mptest::require_transport("gloo");
  comm::Config cfg = comm::Config::from_env();
  mptest::g_rank = cfg.rank;
  if (cfg.world_size != 2 || cfg.transport != "gloo") fail("run with 2 ranks and COMM_TRANSPORT=gloo");
  auto store = comm::make_store(cfg);
  comm::Communicator c = comm::Communicator::create(cfg, store);

  if (cfg.rank == 1) {
    // Stay connected (and silent) well past rank 0's timeout, then tell it we are leaving.
    std::this_thread::sleep_for(cfg.timeout * 2 + 1s);
    store->set("gloo-timeout/slept", "1");
    std::printf("rank 1: PASS (slept through the collective)\n");
    return 0;
  }

  mptest::expect_timeout_then_fail_fast(c, algorithm, cfg.timeout);
  // Rank 0 hosts the store: keep it up until rank 1 is done with it.
  store->get("gloo-timeout/slept", cfg.timeout * 3 + 10s);
  std::printf("rank 0: PASS\n");
  return 0;
}
