// Small all-reduce benchmark on the NCCL transport: NCCL's own collective
// (`native`) against our schedules through the stream engine (ring, direct,
// ...), with the cost model's prediction beside each measurement. Run one
// process per GPU under commrun (tools/gpu-check.sh does).
//
//   nccl_bench [max_bytes]   (default 64 MiB; sizes 8 B .. max_bytes, x8 steps)
// Times are per operation, from CUDA events around 20 back-to-back launches
// after 5 warm-up ones; busbw follows nccl-tests: algbw * 2(n-1)/n.

#include "gpu_test_util.hpp"

#include <comm/comm.hpp>

#include <cstdlib>
#include <string>

using namespace comm;

int main(int argc, char** argv) {
  std::string why;
  if (test::cuda_devices(why) < 1) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return test::kSkip;
  }
  const std::size_t max_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : std::size_t{64} << 20;
  Config cfg = Config::from_env();
  cfg.transport = "nccl";
  Communicator comm = Communicator::create(cfg);
  const int n = comm.size();
  cudaStream_t stream;
  test::cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t start, stop;
  test::cuda_ok(cudaEventCreate(&start), "cudaEventCreate");
  test::cuda_ok(cudaEventCreate(&stop), "cudaEventCreate");
  test::DeviceBuffer in(max_bytes), out(max_bytes);
  test::cuda_ok(cudaMemset(in.get(), 0, max_bytes), "cudaMemset");

  if (comm.rank() == 0)
    std::printf("# allreduce f32 sum, %d ranks; us per op (predicted), busbw GB/s\n%12s %-10s %12s %12s %10s\n", n,
                "bytes", "algorithm", "measured_us", "predicted_us", "busbw");
  for (std::size_t bytes = 8; bytes <= max_bytes; bytes *= 8) {
    const std::size_t count = bytes / 4;
    const View vin{in.get(), count, DataType::f32, MemoryKind::cuda};
    const View vout{out.get(), count, DataType::f32, MemoryKind::cuda};
    const auto candidates = comm.candidates(Collective::allreduce, bytes);
    for (const std::string& alg : comm.algorithms(Collective::allreduce)) {
      CallOptions o{alg, {}, 0, stream};
      try {
        for (int i = 0; i < 5; ++i) comm.allreduce(vin, vout, ReduceOp::sum, o);
        constexpr int kIters = 20;
        test::cuda_ok(cudaEventRecord(start, stream), "cudaEventRecord");
        for (int i = 0; i < kIters; ++i) comm.allreduce(vin, vout, ReduceOp::sum, o);
        test::cuda_ok(cudaEventRecord(stop, stream), "cudaEventRecord");
        test::cuda_ok(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        test::cuda_ok(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        const double us = 1e3 * ms / kIters;
        double predicted = -1;
        for (const auto& c : candidates)
          if (c.algorithm == alg) predicted = c.predicted_us;
        const double busbw = n > 1 ? bytes / us * 1e-3 * 2.0 * (n - 1) / n : bytes / us * 1e-3;
        if (comm.rank() == 0)
          std::printf("%12zu %-10s %12.2f %12.2f %10.2f%s\n", bytes, alg.c_str(), us, predicted, busbw,
                      comm.algorithm_for(Collective::allreduce, bytes) == alg ? "  <- auto" : "");
      } catch (const Error& e) {
        if (!e.is_usage()) throw;
        if (comm.rank() == 0) std::printf("%12zu %-10s not eligible: %s\n", bytes, alg.c_str(), e.what());
      }
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  return 0;
}
