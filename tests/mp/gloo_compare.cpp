// comm-gloo-compare: times one all-reduce size under our schedules and under
// Gloo's own collectives on the gloo transport, checking every result.
//
//   COMM_TRANSPORT=gloo commrun -n 2 comm-gloo-compare [bytes] [iterations] [algorithms...]
//   (defaults: 16 MiB, 10 iterations, ring native native_bcube)
//
// Exit status: 0 pass, 1 fail (wrong result or error), 77 skipped (no Gloo).
#include <comm/comm.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: FAIL: %s\n", rank, what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const auto available = comm::available_transports();
  if (std::find(available.begin(), available.end(), "gloo") == available.end()) {
    std::printf("SKIPPED: %s\n", comm::transport_unavailable_reason("gloo").c_str());
    return 77;
  }
  const std::size_t bytes = argc > 1 ? comm::parse_bytes(argv[1], "bytes") : std::size_t{16} << 20;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 10;
  std::vector<std::string> algorithms;
  for (int i = 3; i < argc; ++i) algorithms.emplace_back(argv[i]);
  if (algorithms.empty()) algorithms = {"ring", "native", "native_bcube"};

  comm::Config cfg = comm::Config::from_env();
  try {
    comm::Communicator c = comm::Communicator::create(cfg);
    const int n = c.size(), me = c.rank();
    const std::size_t count = bytes / sizeof(float);
    std::vector<float> in(count), out(count);
    // Small integers: every order of summation gives the exact same float.
    for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<float>((i * 7 + static_cast<std::size_t>(me) * 3) % 64);
    for (const auto& algorithm : algorithms) {
      comm::CallOptions opts;
      opts.algorithm = algorithm;
      c.allreduce(comm::view(in), comm::view(out), comm::ReduceOp::sum, opts);  // warm-up
      std::vector<double> ms;
      for (int it = 0; it < iters; ++it) {
        c.barrier();
        const auto t0 = Clock::now();
        c.allreduce(comm::view(in), comm::view(out), comm::ReduceOp::sum, opts);
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
      for (std::size_t i = 0; i < count; ++i) {
        float expect = 0;
        for (int r = 0; r < n; ++r) expect += static_cast<float>((i * 7 + static_cast<std::size_t>(r) * 3) % 64);
        if (out[i] != expect)
          fail(me, algorithm + ": element " + std::to_string(i) + " is " + std::to_string(out[i]) + ", expected " +
                       std::to_string(expect));
      }
      std::sort(ms.begin(), ms.end());
      const double median = ms[ms.size() / 2];
      const double algbw = static_cast<double>(bytes) / (median * 1e-3) / 1e9;
      if (me == 0)
        std::printf("allreduce %zu B x %d ranks, %-13s median %8.2f ms  min %8.2f ms  algbw %.2f GB/s  busbw %.2f GB/s\n",
                    bytes, n, algorithm.c_str(), median, ms.front(), algbw, algbw * 2.0 * (n - 1) / n);
    }
  } catch (const comm::Error& e) {
    fail(cfg.rank, std::string(comm::to_string(e.code())) + ": " + e.what());
  }
  return 0;
}
