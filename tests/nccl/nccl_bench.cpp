// Small all-reduce benchmark on the NCCL transport: NCCL's own collective
// (`native`) against our schedules through the stream engine (ring, direct,
// ...), with the cost model's prediction beside each measurement. Run one
// process per GPU under commrun (tools/gpu-check.sh does).
//
//   nccl_bench [max_bytes]   (default 64 MiB; sizes 8 B .. max_bytes, x8 steps)
// Times are per operation, from CUDA events around 100 back-to-back launches
// after 5 warm-up ones; busbw follows nccl-tests: algbw * 2(n-1)/n. On one
// rank a `raw-nccl` row times ncclAllReduce called directly on a communicator
// of its own, the same way: `native` over it is what comm adds to NCCL; and
// `raw-nccl-nb` on a non-blocking one (config.blocking = 0, ncclInProgress
// polled), as the transport creates its own.

#include "gpu_test_util.hpp"

#include <comm/comm.hpp>

#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>

using namespace comm;

namespace {

constexpr int kIters = 100;

void nccl_ok(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(r));
}

// Until a non-blocking communicator's last call has finished (ncclInProgress polled away).
void settle(ncclComm_t c, ncclResult_t r, const char* what) {
  while (r == ncclInProgress) nccl_ok(ncclCommGetAsyncError(c, &r), "ncclCommGetAsyncError");
  nccl_ok(r, what);
}

// A one-rank communicator made as the transport makes its own (config.blocking = 0).
ncclComm_t nonblocking_comm() {
  ncclUniqueId id;
  nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t c = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&c, 1, id, 0, &config);  // sets c before it returns
  settle(c, r, "ncclCommInitRankConfig");
  return c;
}

// Microseconds per call of `call`, enqueued back to back on `stream`, from CUDA events.
double time_per_call(cudaStream_t stream, const std::function<void()>& call) {
  cudaEvent_t start, stop;
  test::cuda_ok(cudaEventCreate(&start), "cudaEventCreate");
  test::cuda_ok(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 5; ++i) call();
  test::cuda_ok(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < kIters; ++i) call();
  test::cuda_ok(cudaEventRecord(stop, stream), "cudaEventRecord");
  test::cuda_ok(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  test::cuda_ok(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 1e3 * ms / kIters;
}

// Host nanoseconds per call of `call`, over 2000 calls after 100 untimed ones.
double host_ns(const std::function<void()>& call) {
  for (int i = 0; i < 100; ++i) call();
  const auto t0 = std::chrono::steady_clock::now();
  constexpr int kCalls = 2000;
  for (int i = 0; i < kCalls; ++i) call();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / kCalls;
}

// What one launch-bound call costs the host, and the CUDA queries the library makes per call:
// where the time between `native` and `raw-nccl` at small sizes goes.
void print_host_costs(Communicator& comm, ncclComm_t raw, ncclComm_t raw_nb, void* in, void* out,
                      cudaStream_t stream) {
  const View vin{in, 2, DataType::f32, MemoryKind::cuda}, vout{out, 2, DataType::f32, MemoryKind::cuda};
  CallOptions o{"native", {}, 0, stream};
  cudaEvent_t ev;
  test::cuda_ok(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
  cudaPointerAttributes attr{};
  cudaStreamCaptureStatus capture{};
  int device = 0;
  const std::pair<const char*, std::function<void()>> rows[] = {
      {"comm allreduce native 8 B", [&] { comm.allreduce(vin, vout, ReduceOp::sum, o); }},
      {"ncclAllReduce 8 B", [&] { ncclAllReduce(in, out, 2, ncclFloat32, ncclSum, raw, stream); }},
      {"ncclAllReduce 8 B, non-blocking",
       [&] { settle(raw_nb, ncclAllReduce(in, out, 2, ncclFloat32, ncclSum, raw_nb, stream), "ncclAllReduce"); }},
      {"cudaPointerGetAttributes", [&] { cudaPointerGetAttributes(&attr, in); }},
      {"cudaStreamIsCapturing", [&] { cudaStreamIsCapturing(stream, &capture); }},
      {"cudaEventRecord", [&] { cudaEventRecord(ev, stream); }},
      {"cudaGetDevice", [&] { cudaGetDevice(&device); }},
  };
  for (const auto& [name, call] : rows) {
    std::printf("# host: %-28s %8.0f ns per call\n", name, host_ns(call));
    test::cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  cudaEventDestroy(ev);
}

}  // namespace

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
  test::DeviceBuffer in(max_bytes), out(max_bytes);
  test::cuda_ok(cudaMemset(in.get(), 0, max_bytes), "cudaMemset");

  if (comm.rank() == 0)
    std::printf("# allreduce f32 sum, %d ranks; us per op (predicted), busbw GB/s\n%12s %-10s %12s %12s %10s\n", n,
                "bytes", "algorithm", "measured_us", "predicted_us", "busbw");
  ncclComm_t raw = nullptr, raw_nb = nullptr;
  if (n == 1) {
    int device = 0;
    test::cuda_ok(cudaGetDevice(&device), "cudaGetDevice");
    nccl_ok(ncclCommInitAll(&raw, 1, &device), "ncclCommInitAll");
    raw_nb = nonblocking_comm();
  }
  for (std::size_t bytes = 8; bytes <= max_bytes; bytes *= 8) {
    const std::size_t count = bytes / 4;
    const View vin{in.get(), count, DataType::f32, MemoryKind::cuda};
    const View vout{out.get(), count, DataType::f32, MemoryKind::cuda};
    const auto candidates = comm.candidates(Collective::allreduce, bytes);
    for (const std::string& alg : comm.algorithms(Collective::allreduce)) {
      CallOptions o{alg, {}, 0, stream};
      try {
        const double us = time_per_call(stream, [&] { comm.allreduce(vin, vout, ReduceOp::sum, o); });
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
    if (raw)
      for (const auto& [name, c] : {std::pair{"raw-nccl", raw}, std::pair{"raw-nccl-nb", raw_nb}}) {
        const double us = time_per_call(stream, [&] {
          settle(c, ncclAllReduce(in.get(), out.get(), count, ncclFloat32, ncclSum, c, stream), "ncclAllReduce");
        });
        std::printf("%12zu %-10s %12.2f %12s %10.2f\n", bytes, name, us, "-", bytes / us * 1e-3);
      }
  }
  if (raw) {
    print_host_costs(comm, raw, raw_nb, in.get(), out.get(), stream);
    ncclCommDestroy(raw);
    ncclCommDestroy(raw_nb);
  }
  cudaStreamDestroy(stream);
  return 0;
}
