// comm-mpi-embed: an MPI program that initialises and finalises MPI itself
// and embeds comm. Under mpirun (4 ranks):
//   1. comm over MPI_COMM_WORLD (comm::mpi::create): all-reduce, every
//      algorithm, checked against values computed here and against
//      MPI_Allreduce of the same data;
//   2. MPI_Comm_split into halves, one comm communicator per half: each
//      all-reduces its members' ranks, checked the same way;
//   3. a Config whose rank disagrees with MPI: invalid_config naming both;
//   4. after every comm communicator is gone, MPI still works (comm did not
//      finalise it), and the program's own MPI_Finalize succeeds.
//
//   mpirun -np 4 comm-mpi-embed [multiple|serialized|funneled]
//
// Exit status: 0 pass, 1 fail.

#include <comm/comm.hpp>
#include <comm/mpi.hpp>

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <regex>
#include <string>
#include <vector>

namespace {

int g_world_rank = -1;
int g_failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++g_failures;
  std::printf("rank %d: FAIL: %s\n", g_world_rank, what.c_str());
  std::fflush(stdout);
}

int level_of(const std::string& name) {
  if (name == "multiple") return MPI_THREAD_MULTIPLE;
  if (name == "serialized") return MPI_THREAD_SERIALIZED;
  if (name == "funneled") return MPI_THREAD_FUNNELED;
  std::fprintf(stderr, "usage: comm-mpi-embed [multiple|serialized|funneled]\n");
  std::exit(2);
}

// Element i of rank r: r * 1000 + i (exact in i64 and in f64).
std::vector<std::int64_t> input(int rank, std::size_t n) {
  std::vector<std::int64_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = rank * 1000 + static_cast<std::int64_t>(i);
  return v;
}

// Every algorithm of `c` against the independent sum and against MPI_Allreduce on `mpi_comm`.
void check_allreduce(comm::Communicator& c, MPI_Comm mpi_comm, const std::vector<int>& members,
                     const std::string& where) {
  const std::size_t n = 1003;
  const auto mine = input(g_world_rank, n);
  std::vector<std::int64_t> from_mpi(n);
  MPI_Allreduce(mine.data(), from_mpi.data(), static_cast<int>(n), MPI_INT64_T, MPI_SUM, mpi_comm);
  std::vector<std::string> algos = c.algorithms(comm::Collective::allreduce);
  algos.insert(algos.begin(), "");
  for (const std::string& algo : algos) {
    std::vector<std::int64_t> out(n, -1);
    comm::CallOptions opts;
    opts.algorithm = algo;
    c.allreduce(comm::view(mine), comm::view(out), comm::ReduceOp::sum, opts);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
      std::int64_t want = 0;
      for (int m : members) want += m * 1000 + static_cast<std::int64_t>(i);
      wrong += out[i] != want || from_mpi[i] != want;
    }
    expect(wrong == 0, where + ": allreduce/" + (algo.empty() ? "auto" : algo) + ": " + std::to_string(wrong) +
                           " wrong elements");
  }
}

void world(int n) {
  comm::Communicator c = comm::mpi::create(MPI_COMM_WORLD);
  expect(c.rank() == g_world_rank && c.size() == n, "world communicator is rank " + std::to_string(c.rank()) +
                                                        " of " + std::to_string(c.size()));
  expect(c.transport_name() == "mpi", "transport is " + std::string(c.transport_name()));
  std::vector<int> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  check_allreduce(c, MPI_COMM_WORLD, all, "world");
}

void halves(int n) {
  const int color = g_world_rank < n / 2 ? 0 : 1;
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, color, g_world_rank, &half);
  int half_rank = -1, half_size = 0;
  MPI_Comm_rank(half, &half_rank);
  MPI_Comm_size(half, &half_size);
  std::vector<int> members;
  for (int r = 0; r < n; ++r)
    if ((r < n / 2 ? 0 : 1) == color) members.push_back(r);
  {
    comm::Communicator c = comm::mpi::create(half);
    expect(c.rank() == half_rank && c.size() == half_size,
           "half " + std::to_string(color) + " communicator is rank " + std::to_string(c.rank()) + " of " +
               std::to_string(c.size()) + ", MPI says " + std::to_string(half_rank) + " of " +
               std::to_string(half_size));
    check_allreduce(c, half, members, "half " + std::to_string(color));
    // A split of the handed-over communicator is built from it too.
    comm::Communicator solo = c.split(c.rank(), 0);
    std::int64_t v = g_world_rank, sum = -1;
    solo.allreduce(comm::ConstView{&v, 1, comm::DataType::i64}, comm::View{&sum, 1, comm::DataType::i64},
                   comm::ReduceOp::sum);
    expect(solo.size() == 1 && sum == g_world_rank, "split of a half into ones: sum " + std::to_string(sum));
  }
  MPI_Comm_free(&half);
}

void disagreeing_rank(int n) {
  comm::Config cfg = comm::mpi::config(MPI_COMM_WORLD);
  cfg.rank = (g_world_rank + 1) % n;
  try {
    comm::Communicator c = comm::Communicator::create(cfg);
    expect(false, "a Config with rank " + std::to_string(cfg.rank) + " on MPI rank " + std::to_string(g_world_rank) +
                      " was accepted");
  } catch (const comm::Error& e) {
    const std::string msg = e.what();
    const bool names_both =
        msg.find("rank " + std::to_string(cfg.rank) + " of " + std::to_string(n)) != std::string::npos &&
        msg.find("rank " + std::to_string(g_world_rank) + " of " + std::to_string(n)) != std::string::npos;
    expect(e.code() == comm::ErrorCode::invalid_config && names_both,
           "wrong error for a disagreeing rank: " + std::string(comm::to_string(e.code())) + ": " + msg);
    if (g_world_rank == 0) std::printf("rank 0: disagreeing rank refused: %s\n", msg.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int wanted = level_of(argc > 1 ? argv[1] : "multiple");
  int provided = -1;
  MPI_Init_thread(&argc, &argv, wanted, &provided);
  int n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n < 2) {
    std::printf("FAIL: run with at least 2 ranks (mpirun -np 4)\n");
    MPI_Finalize();
    return 1;
  }
  try {
    world(n);
    halves(n);
    disagreeing_rank(n);
  } catch (const comm::Error& e) {
    expect(false, std::string("comm::Error ") + std::string(comm::to_string(e.code())) + ": " + e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // comm is gone; MPI must still be ours.
  int finalized = 1, total = 0, one = 1;
  MPI_Finalized(&finalized);
  expect(!finalized, "MPI was finalised by comm");
  MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  expect(total == n, "MPI_Allreduce after comm: " + std::to_string(total));
  int failures = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  const int rc = MPI_Finalize();
  expect(rc == MPI_SUCCESS, "MPI_Finalize returned " + std::to_string(rc));
  if (g_world_rank == 0)
    std::printf("comm-mpi-embed: %d ranks, thread level %d: %s\n", n, provided, failures ? "FAIL" : "PASS");
  return failures || g_failures ? 1 : 0;
}
