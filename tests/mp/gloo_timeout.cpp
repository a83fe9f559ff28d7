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
#include <comm/comm.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

int g_rank = -1;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAIL: %s\n", g_rank, what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: comm-gloo-timeout <algorithm>   (under commrun -n 2, COMM_TRANSPORT=gloo)\n");
    return 2;
  }
  const std::string algorithm = argv[1];
  const auto available = comm::available_transports();
  if (std::find(available.begin(), available.end(), "gloo") == available.end()) {
    std::printf("SKIPPED: %s\n", comm::transport_unavailable_reason("gloo").c_str());
    return 77;
  }
  comm::Config cfg = comm::Config::from_env();
  g_rank = cfg.rank;
  if (cfg.world_size != 2 || cfg.transport != "gloo") fail("run with 2 ranks and COMM_TRANSPORT=gloo");
  const double timeout_s = std::chrono::duration<double>(cfg.timeout).count();
  auto store = comm::make_store(cfg);
  comm::Communicator c = comm::Communicator::create(cfg, store);

  if (cfg.rank == 1) {
    // Stay connected (and silent) well past rank 0's timeout, then tell it we are leaving.
    std::this_thread::sleep_for(cfg.timeout * 2 + 1s);
    store->set("gloo-timeout/slept", "1");
    std::printf("rank 1: PASS (slept through the collective)\n");
    return 0;
  }

  std::vector<float> data(4096, 1.0f);
  comm::CallOptions opts;
  opts.algorithm = algorithm;
  const auto t0 = Clock::now();
  try {
    c.allreduce(comm::view(data), comm::ReduceOp::sum, opts);
    fail("allreduce completed although rank 1 never called it");
  } catch (const comm::Error& e) {
    const double took = seconds_since(t0);
    std::printf("rank 0: %s allreduce failed after %.2f s (timeout %.2f s): %s: %s\n", algorithm.c_str(), took,
                timeout_s, std::string(comm::to_string(e.code())).c_str(), e.what());
    if (e.code() != comm::ErrorCode::timeout) fail("expected ErrorCode::timeout");
    if (took < timeout_s * 0.9 || took > timeout_s + 2.5) fail("the timeout did not fire at the configured time");
  }
  if (!c.failed()) fail("the communicator is not failed after a timeout");

  const auto t1 = Clock::now();
  try {
    c.allreduce(comm::view(data), comm::ReduceOp::sum, opts);
    fail("a call on a failed communicator succeeded");
  } catch (const comm::Error& e) {
    const double took = seconds_since(t1);
    std::printf("rank 0: next call failed after %.4f s: %s: %s\n", took,
                std::string(comm::to_string(e.code())).c_str(), e.what());
    if (e.code() != comm::ErrorCode::communicator_failed) fail("expected ErrorCode::communicator_failed");
    if (took > 0.1) fail("the next call did not fail fast");
  }
  // Rank 0 hosts the store: keep it up until rank 1 is done with it.
  store->get("gloo-timeout/slept", cfg.timeout * 3 + 10s);
  std::printf("rank 0: PASS\n");
  return 0;
}
