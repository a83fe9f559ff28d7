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

#include "mp_test_util.hpp"

#include <comm/comm.hpp>

#include <cstdio>
#include <regex>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc != 2) {
    std::fprintf(stderr, "usage: comm-mpi-timeout <algorithm>   (mpirun -np 2, COMM_TRANSPORT=mpi)\n");
    return 2;
  }
  const std::string algorithm = argv[1];
  comm::Config cfg = comm::Config::from_env();
  comm::Communicator c = comm::Communicator::create(cfg);
  mptest::g_rank = c.rank();
  if (c.size() != 2 || c.transport_name() != "mpi") mptest::fail("run with 2 ranks and COMM_TRANSPORT=mpi");
  c.barrier();  // both are here before rank 1 freezes

  if (c.rank() == 1) {
    std::this_thread::sleep_for(cfg.timeout * 3);
    std::printf("rank 1: woke up (the job should have ended by now)\n");
    return 0;
  }

  const std::string msg = mptest::expect_timeout_then_fail_fast(c, algorithm, cfg.timeout);
  if (algorithm != "native" && !std::regex_search(msg, std::regex("rank\\(s\\) 1([^0-9]|$)")))
    mptest::fail("the error does not name rank 1");
  std::printf("rank 0: PASS\n");
  return 0;
}
