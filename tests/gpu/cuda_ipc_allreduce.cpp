// CUDA-IPC direct-memory all-reduce across processes (run under commrun, 2
// ranks; two processes on one device are enough): IPC handles exchanged
// through the store; mem_oneshot and mem_twoshot for every dtype and op
// against a host reference, in place and out of place, 8 B to 64 MiB; 100
// calls captured in a CUDA graph and replayed 10 times with fresh inputs;
// usage errors before anything is enqueued; a peer that does not arrive
// reported by name; and the latency of the launch-plus-flag floor and of the
// all-reduce at decode sizes, printed for the closing note.
// Without a CUDA device every rank prints "SKIPPED: <reason>" and exits 77.

#include "cuda_direct_engine.hpp"
#include "cuda_ipc_memory.hpp"
#include "gpu_test_util.hpp"

#include <comm/config.hpp>
#include <comm/error.hpp>
#include <comm/store.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

using namespace comm;
using namespace comm::cuda_ipc;
using comm::test::cuda_ok;
using comm::test::DeviceBuffer;

namespace {

constexpr DataType kTypes[] = {DataType::f32, DataType::f64, DataType::f16, DataType::bf16,
                               DataType::i8,  DataType::u8,  DataType::i32, DataType::i64};
constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg};
constexpr const char* kAlgorithms[] = {"mem_oneshot", "mem_twoshot"};
constexpr std::size_t kWindow = (std::size_t{64} << 20) + 4096;

int failures = 0;

void fail(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  ++failures;
}

// Small exact values: products of 1s and 2s stay exact and in range for every type and rank count.
double value(int rank, std::size_t i, ReduceOp op, unsigned salt) {
  if (op == ReduceOp::prod) return static_cast<double>((i + static_cast<std::size_t>(rank) + salt) % 2 + 1);
  return static_cast<double>((i * 7 + static_cast<std::size_t>(rank) * 3 + salt) % 11);
}

double expected(int n, std::size_t i, ReduceOp op, DataType t, unsigned salt) {
  const ReduceOp fold = op == ReduceOp::avg ? ReduceOp::sum : op;
  double acc = value(0, i, op, salt);
  for (int r = 1; r < n; ++r) acc = comm::test::reference(acc, value(r, i, op, salt), fold, t, n);
  if (op == ReduceOp::avg) acc = is_floating(t) ? acc / n : std::trunc(acc / n);
  return acc;
}

std::vector<std::byte> inputs(int rank, std::size_t count, DataType t, ReduceOp op, unsigned salt) {
  std::vector<std::byte> h(count * dtype_size(t));
  for (std::size_t i = 0; i < count; ++i) comm::test::put(h, t, i, value(rank, i, op, salt));
  return h;
}

// The first element that differs from the reference, or "".
std::string compare(const std::vector<std::byte>& got, std::size_t count, int n, DataType t, ReduceOp op,
                    unsigned salt) {
  for (std::size_t i = 0; i < count; ++i) {
    const double want = expected(n, i, op, t, salt);
    const double have = comm::test::get(got, t, i);
    if (std::fabs(have - want) > comm::test::tolerance(t, want))
      return "element " + std::to_string(i) + " is " + std::to_string(have) + ", expected " + std::to_string(want);
  }
  return "";
}

void barrier(Store& store, int rank, int size, const std::string& name) {
  store.set("test/" + name + "/" + std::to_string(rank), "1");
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("test/" + name + "/" + std::to_string(r));
  store.wait(keys, std::chrono::seconds(60));
}

struct Env {
  Store& store;
  int rank, size;
  CudaIpcMemory& memory;
  CudaDirectEngine& engine;
  cudaStream_t stream;
};

// One all-reduce, checked; returns false when it failed.
bool check_one(Env& e, const char* alg, DataType t, ReduceOp op, std::size_t count, bool in_place, unsigned salt) {
  const std::size_t bytes = count * dtype_size(t);
  DeviceBuffer in(bytes), out(bytes);
  in.upload(inputs(e.rank, count, t, op, salt));
  cuda_ok(cudaMemsetAsync(out.get(), 0xee, bytes, e.stream), "cudaMemsetAsync");
  void* dst = in_place ? in.get() : out.get();
  e.engine.allreduce(in.get(), dst, count, t, op, alg, e.stream);
  cuda_ok(cudaStreamSynchronize(e.stream), "cudaStreamSynchronize");
  e.engine.check();
  const std::string bad = compare(in_place ? in.download() : out.download(), count, e.size, t, op, salt);
  if (!bad.empty())
    fail(e.rank, std::string(alg) + " " + std::string(to_string(t)) + " " + std::string(to_string(op)) + " count " +
                     std::to_string(count) + (in_place ? " in place: " : " out of place: ") + bad);
  return bad.empty();
}

void sweep(Env& e) {
  std::size_t cases = 0;
  unsigned salt = 0;
  // Every dtype and op at 8 B, an odd count and a count not divisible by the ranks.
  for (const char* alg : kAlgorithms)
    for (DataType t : kTypes)
      for (ReduceOp op : kOps)
        for (std::size_t bytes : {std::size_t{8}, std::size_t{1000}, std::size_t{65536 + 24}})
          for (bool in_place : {true, false}) {
            const std::size_t count = std::max<std::size_t>(1, bytes / dtype_size(t));
            check_one(e, alg, t, op, count, in_place, ++salt);
            ++cases;
          }
  // The large sizes for a float, a 16-bit float and an integer type.
  for (const char* alg : kAlgorithms)
    for (std::size_t bytes : {std::size_t{1} << 20, std::size_t{4} << 20, std::size_t{64} << 20})
      for (auto [t, op] : {std::pair{DataType::f32, ReduceOp::sum}, std::pair{DataType::bf16, ReduceOp::sum},
                           std::pair{DataType::i32, ReduceOp::max}}) {
        check_one(e, alg, t, op, bytes / dtype_size(t), bytes != (std::size_t{4} << 20), ++salt);
        ++cases;
      }
  if (e.rank == 0) std::printf("sweep: %zu all-reduces checked against the host reference\n", cases);
}

// 100 all-reduces (alternating algorithms, each its own buffers) captured once, replayed 10 times
// with new inputs each time; every replay's outputs are checked.
void graph(Env& e) {
  constexpr int kCalls = 100, kReplays = 10;
  constexpr std::size_t kCount = 4096;
  const DataType t = DataType::f32;
  const ReduceOp op = ReduceOp::sum;
  const std::size_t bytes = kCount * sizeof(float);
  DeviceBuffer in(bytes * kCalls), out(bytes * kCalls);
  for (const char* alg : kAlgorithms) e.engine.prepare(kCount, t, alg);
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  cuda_ok(cudaStreamBeginCapture(e.stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  for (int k = 0; k < kCalls; ++k)
    e.engine.allreduce(static_cast<std::byte*>(in.get()) + k * bytes, static_cast<std::byte*>(out.get()) + k * bytes,
                       kCount, t, op, kAlgorithms[k % 2], e.stream);
  cuda_ok(cudaStreamEndCapture(e.stream, &g), "cudaStreamEndCapture");
  cuda_ok(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate");
  std::size_t bad = 0;
  cudaEvent_t a, b;
  cuda_ok(cudaEventCreate(&a), "cudaEventCreate");
  cuda_ok(cudaEventCreate(&b), "cudaEventCreate");
  float replay_ms = 0;  // the fastest replay: the others may wait for a peer still checking results
  for (int replay = 0; replay < kReplays; ++replay) {
    std::vector<std::byte> host(bytes * kCalls);
    for (int k = 0; k < kCalls; ++k) {
      const auto part = inputs(e.rank, kCount, t, op, static_cast<unsigned>(1000 + replay * kCalls + k));
      std::copy(part.begin(), part.end(), host.begin() + static_cast<std::ptrdiff_t>(k * bytes));
    }
    in.upload(host);
    cuda_ok(cudaMemsetAsync(out.get(), 0xee, bytes * kCalls, e.stream), "cudaMemsetAsync");
    barrier(e.store, e.rank, e.size, "replay" + std::to_string(replay));
    cuda_ok(cudaEventRecord(a, e.stream), "cudaEventRecord");
    cuda_ok(cudaGraphLaunch(exec, e.stream), "cudaGraphLaunch");
    cuda_ok(cudaEventRecord(b, e.stream), "cudaEventRecord");
    cuda_ok(cudaStreamSynchronize(e.stream), "cudaStreamSynchronize");
    e.engine.check();
    float ms = 0;
    cuda_ok(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    if (replay == 0 || ms < replay_ms) replay_ms = ms;
    const std::vector<std::byte> got = out.download();
    for (int k = 0; k < kCalls; ++k) {
      std::vector<std::byte> part(got.begin() + static_cast<std::ptrdiff_t>(k * bytes),
                                  got.begin() + static_cast<std::ptrdiff_t>((k + 1) * bytes));
      const std::string why = compare(part, kCount, e.size, t, op, static_cast<unsigned>(1000 + replay * kCalls + k));
      if (!why.empty() && bad++ < 3)
        fail(e.rank, "graph replay " + std::to_string(replay) + " call " + std::to_string(k) + ": " + why);
    }
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  if (e.rank == 0 && bad == 0)
    std::printf("graph: %d all-reduces captured, replayed %d times, all results correct; fastest replay %.2f us per "
                "all-reduce of %zu B (mem_oneshot and mem_twoshot alternating)\n",
                kCalls, kReplays, replay_ms * 1000.0 / kCalls, bytes);
}

template <class F>
void expect_error(int rank, ErrorCode code, const std::string& must_name, const std::string& what, F&& f) {
  try {
    f();
    fail(rank, what + ": no error");
  } catch (const Error& err) {
    const std::string msg = err.what();
    if (err.code() != code || msg.find(must_name) == std::string::npos)
      fail(rank, what + ": got " + std::string(to_string(err.code())) + " \"" + msg + "\", expected " +
                     std::string(to_string(code)) + " naming " + must_name);
  }
}

void usage_errors(Env& e) {
  std::vector<float> host(16);
  DeviceBuffer dev(64 * sizeof(float));
  expect_error(e.rank, ErrorCode::invalid_argument, "`input`", "host input", [&] {
    e.engine.allreduce(host.data(), dev.get(), 16, DataType::f32, ReduceOp::sum, "mem_oneshot", e.stream);
  });
  expect_error(e.rank, ErrorCode::invalid_argument, "`output`", "null output", [&] {
    e.engine.allreduce(dev.get(), nullptr, 16, DataType::f32, ReduceOp::sum, "mem_oneshot", e.stream);
  });
  expect_error(e.rank, ErrorCode::invalid_argument, "overlap", "partial overlap", [&] {
    e.engine.allreduce(dev.get(), static_cast<float*>(dev.get()) + 1, 16, DataType::f32, ReduceOp::sum,
                       "mem_oneshot", e.stream);
  });
  expect_error(e.rank, ErrorCode::unknown_algorithm, "ring", "unknown algorithm", [&] {
    e.engine.allreduce(dev.get(), dev.get(), 16, DataType::f32, ReduceOp::sum, "ring", e.stream);
  });
  expect_error(e.rank, ErrorCode::unsupported, "window", "larger than a window", [&] {
    e.engine.prepare(kWindow, DataType::f32, "mem_oneshot");
  });
}

// A peer that never makes the call: the device wait gives up and the host hears its name.
void absent_peer(Env& e) {
  CudaIpcOptions o;
  o.window_bytes = 4096;
  o.timeout = std::chrono::milliseconds(500);
  o.prefix = "absent";
  CudaIpcMemory m(e.store, e.rank, e.size, o);
  CudaDirectEngine eng(m);
  if (e.rank == 0) {
    DeviceBuffer buf(64);
    const auto t0 = std::chrono::steady_clock::now();
    eng.allreduce(buf.get(), buf.get(), 16, DataType::f32, ReduceOp::sum, "mem_oneshot", e.stream);
    cuda_ok(cudaStreamSynchronize(e.stream), "cudaStreamSynchronize");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    expect_error(e.rank, ErrorCode::timeout, "rank 1", "absent peer", [&] { eng.check(); });
    if (s > 5.0) fail(e.rank, "absent peer: the device wait took " + std::to_string(s) + " s for a 0.5 s timeout");
  }
  barrier(e.store, e.rank, e.size, "absent");
}

double elapsed_us(cudaEvent_t a, cudaEvent_t b, int iterations) {
  float ms = 0;
  cuda_ok(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
  return ms * 1000.0 / iterations;
}

// Launch-plus-flag floor (signal/wait ping-pong through DirectMemory, one kernel each, in
// windows of their own) and the all-reduce at decode sizes.
void latency(Env& e) {
  constexpr int kIters = 2000;
  cudaEvent_t a, b;
  cuda_ok(cudaEventCreate(&a), "cudaEventCreate");
  cuda_ok(cudaEventCreate(&b), "cudaEventCreate");
  const int peer = 1 - e.rank;
  CudaIpcOptions o;
  o.window_bytes = 4096;
  o.prefix = "floor";
  CudaIpcMemory flags(e.store, e.rank, e.size, o);
  barrier(e.store, e.rank, e.size, "floor");
  cuda_ok(cudaEventRecord(a, e.stream), "cudaEventRecord");
  const auto far = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (std::uint64_t i = 1; i <= kIters; ++i) {
    if (e.rank == 0) flags.signal(0, i, e.stream);
    const FlagWait w{peer, i};
    flags.wait(0, std::span<const FlagWait>(&w, 1), far, e.stream);
    if (e.rank == 1) flags.signal(0, i, e.stream);
  }
  cuda_ok(cudaEventRecord(b, e.stream), "cudaEventRecord");
  cuda_ok(cudaStreamSynchronize(e.stream), "cudaStreamSynchronize");
  flags.check();
  if (e.rank == 0)
    std::printf("floor: flag ping-pong through kernels, %.2f us per hand-off (half round trip)\n",
                elapsed_us(a, b, 2 * kIters));
  for (std::size_t bytes : {std::size_t{8}, std::size_t{8} << 10, std::size_t{64} << 10, std::size_t{256} << 10,
                            std::size_t{1} << 20}) {
    const std::size_t count = bytes / 2;  // bf16, the decode dtype
    DeviceBuffer buf(bytes < 2 ? 2 : bytes);
    for (const char* alg : kAlgorithms) {
      e.engine.allreduce(buf.get(), buf.get(), count, DataType::bf16, ReduceOp::max, alg, e.stream);  // plan, warm
      cuda_ok(cudaStreamSynchronize(e.stream), "cudaStreamSynchronize");
      barrier(e.store, e.rank, e.size, std::string("lat") + alg + std::to_string(bytes));
      cuda_ok(cudaEventRecord(a, e.stream), "cudaEventRecord");
      for (int i = 0; i < kIters / 4; ++i)
        e.engine.allreduce(buf.get(), buf.get(), count, DataType::bf16, ReduceOp::max, alg, e.stream);
      cuda_ok(cudaEventRecord(b, e.stream), "cudaEventRecord");
      cuda_ok(cudaStreamSynchronize(e.stream), "cudaStreamSynchronize");
      e.engine.check();
      if (e.rank == 0)
        std::printf("latency: %s bf16 %8zu B: %.2f us per all-reduce (eager launches, %d ranks)\n", alg, bytes,
                    elapsed_us(a, b, kIters / 4), e.size);
    }
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

}  // namespace

int main() {
  std::string why;
  const int devices = comm::test::cuda_devices(why);
  if (devices < 0) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return comm::test::kSkip;
  }
  try {
    const Config cfg = Config::from_env();
    auto store = make_store(cfg);
    cuda_ok(cudaSetDevice(cfg.rank % devices), "cudaSetDevice");
    CudaIpcOptions o;
    o.window_bytes = kWindow;
    o.timeout = std::chrono::seconds(20);
    CudaIpcMemory memory(*store, cfg.rank, cfg.world_size, o);
    CudaDirectEngine engine(memory);
    cudaStream_t stream = nullptr;
    cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    Env e{*store, cfg.rank, cfg.world_size, memory, engine, stream};
    usage_errors(e);
    sweep(e);
    graph(e);
    if (cfg.world_size == 2) latency(e);
    absent_peer(e);
    barrier(*store, cfg.rank, cfg.world_size, "end");
    memory.close();
    cudaStreamDestroy(stream);
  } catch (const std::exception& ex) {
    fail(-1, std::string("exception: ") + ex.what());
  }
  if (failures == 0) std::printf("cuda_ipc_allreduce: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
