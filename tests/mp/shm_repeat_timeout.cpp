// comm-shm-repeat-timeout: a timeout on the repeat path of a blocking
// all-reduce (core/repeat_allreduce.cpp), which reads no clock before its
// first signal: its deadline runs from the first wait that finds a flag
// missing. Every rank all-reduces 2 floats 50 times (after the first, each
// call takes the repeat path) and checks the sums; then the last rank stops
// calling collectives while the others enter call 51 with a 1 s timeout.
// Each of them must fail with ErrorCode::timeout naming the last rank, after
// at least the timeout and well before the communicator's own 60 s.
//
//   comm-shm-repeat-timeout      (2 or more ranks under commrun, COMM_TRANSPORT=shm)
// Exit status: 0 as expected, 1 otherwise.

#include <comm/comm.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

int main() {
  comm::Config cfg = comm::Config::from_env();
  cfg.timeout = std::chrono::seconds(60);
  comm::Communicator c = comm::Communicator::create(cfg);
  const int n = c.size(), last = n - 1;
  for (int k = 0; k < 50; ++k) {
    std::vector<float> v{static_cast<float>(c.rank() + k), 1.0f};
    c.allreduce(comm::view(v), comm::ReduceOp::sum);
    const float expect = static_cast<float>(n * (n - 1) / 2 + n * k);
    if (v[0] != expect || v[1] != static_cast<float>(n)) {
      std::printf("FAIL: rank %d call %d: got %g %g, expected %g %g\n", c.rank(), k, v[0], v[1], expect, double(n));
      return 1;
    }
  }
  if (c.rank() == last) {
    std::this_thread::sleep_for(std::chrono::seconds(3));  // the others time out meanwhile
    std::printf("ok: rank %d stayed away\n", c.rank());
    return 0;
  }
  std::vector<float> v{1.0f, 1.0f};
  comm::CallOptions opts;
  opts.timeout = std::chrono::seconds(1);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    c.allreduce(comm::view(v), comm::ReduceOp::sum, opts);
    std::printf("FAIL: rank %d completed an all-reduce its peer never entered\n", c.rank());
    return 1;
  } catch (const comm::Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string what = e.what();
    const bool named = what.find("waiting for rank " + std::to_string(last) + ", which has not arrived") != std::string::npos;
    const bool ok = e.code() == comm::ErrorCode::timeout && named && s >= 0.9 && s < 10;
    std::printf("%s: rank %d failed after %.2f s (%s): %s\n", ok ? "ok" : "FAIL", c.rank(), s,
                comm::to_string(e.code()).data(), e.what());
    return ok ? 0 : 1;
  }
}
