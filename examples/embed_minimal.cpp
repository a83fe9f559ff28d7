// The smallest complete program: join the group the environment describes
// (COMM_RANK, COMM_WORLD_SIZE, COMM_STORE, COMM_TRANSPORT; set by commrun,
// torchrun, Slurm) and sum a vector across all ranks.
#include <comm/comm.hpp>

#include <cstdio>
#include <vector>

int main() try {
  comm::Communicator c = comm::Communicator::create(comm::Config::from_env());
  std::vector<float> x(1024, static_cast<float>(c.rank() + 1));
  c.allreduce(comm::view(x), comm::ReduceOp::sum);  // in place: x[i] = 1 + 2 + ... + size
  const float want = c.size() * (c.size() + 1) / 2.0f;
  std::printf("rank %d of %d: x[0] = %g (%s)\n", c.rank(), c.size(), x[0], x[0] == want ? "ok" : "WRONG");
  return x[0] == want ? 0 : 1;
} catch (const comm::Error& e) {  // every failure says what went wrong and what to do
  std::fprintf(stderr, "embed_minimal: %s\n", e.what());
  return 1;
}
