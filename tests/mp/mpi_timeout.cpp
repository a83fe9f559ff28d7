// comm-mpi-timeout: rank 1 is frozen (it stops calling comm for 3 timeouts);
// rank 0's all-reduce must end at COMM_TIMEOUT. Under mpirun -np 2:
//
//   COMM_TIMEOUT=2 comm-mpi-timeout ring    comm::Error(timeout) naming rank 1, then fail-fast;
//                                           at exit the failed job ends with MPI_Abort
//   COMM_TIMEOUT=2 COMM_MPI_NATIVE=poll comm-mpi-timeout native
//                                           comm::Error(timeout) (MPI cannot say who is missing)
//   COMM_TIMEOUT=2 comm-mpi-timeout native  MPI's blocking MPI_Allreduce never returns: the
//                                           watchdog ends the job with MPI_Abort, saying why
//
// Rank 0 prints "rank 0: PASS" when its checks hold; the job itself then ends
// with MPI_Abort (a failed mpi communicator must not wait in MPI_Finalize for
// a frozen peer), so the test passes on that line, not on the exit status.

#include <comm/comm.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& what) {
  std::printf("rank 0: FAIL: %s\n", what.c_str());
  std::fflush(stdout);
  std::_Exit(1);
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc != 2) {
    std::fprintf(stderr, "usage: comm-mpi-timeout <algorithm>   (mpirun -np 2, COMM_TRANSPORT=mpi)\n");
    return 2;
  }
  const std::string algorithm = argv[1];
  comm::Config cfg = comm::Config::from_env();
  comm::Communicator c = comm::Communicator::create(cfg);
  if (c.size() != 2 || c.transport_name() != "mpi") fail("run with 2 ranks and COMM_TRANSPORT=mpi");
  const double timeout_s = std::chrono::duration<double>(cfg.timeout).count();
  c.barrier();  // both are here before rank 1 freezes

  if (c.rank() == 1) {
    std::this_thread::sleep_for(cfg.timeout * 3);
    std::printf("rank 1: woke up (the job should have ended by now)\n");
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
    const std::string msg = e.what();
    std::printf("rank 0: %s allreduce failed after %.2f s (timeout %.2f s): %s: %s\n", algorithm.c_str(), took,
                timeout_s, std::string(comm::to_string(e.code())).c_str(), msg.c_str());
    if (e.code() != comm::ErrorCode::timeout) fail("expected ErrorCode::timeout");
    if (took < timeout_s * 0.9 || took > timeout_s + 2.5) fail("the timeout did not fire at the configured time");
    if (algorithm != "native" && !std::regex_search(msg, std::regex("rank\\(s\\) 1([^0-9]|$)")))
      fail("the error does not name rank 1");
  }
  if (!c.failed()) fail("the communicator is not failed after a timeout");
  const auto t1 = Clock::now();
  try {
    c.allreduce(comm::view(data), comm::ReduceOp::sum, opts);
    fail("a call on a failed communicator succeeded");
  } catch (const comm::Error& e) {
    if (e.code() != comm::ErrorCode::communicator_failed) fail("expected ErrorCode::communicator_failed");
    if (seconds_since(t1) > 0.1) fail("the next call did not fail fast");
  }
  std::printf("rank 0: PASS\n");
  return 0;
}
