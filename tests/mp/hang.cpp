// A job that hangs on purpose: the last rank stops calling collectives after
// two all-reduces while the others enter the third. Used to check that
// `commrun --timeout` names the rank that is behind and the operation.

#include <comm/comm.hpp>

#include <chrono>
#include <thread>
#include <vector>

int main() {
  comm::Config cfg = comm::Config::from_env();
  cfg.timeout = std::chrono::minutes(10);  // commrun's --timeout must act first
  comm::Communicator c = comm::Communicator::create(cfg);
  std::vector<float> v(1024, 1.0f);
  for (int i = 0; i < 3; ++i) {
    if (i == 2 && c.rank() == c.size() - 1)
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    c.allreduce(comm::view(v), comm::ReduceOp::sum);
  }
}
