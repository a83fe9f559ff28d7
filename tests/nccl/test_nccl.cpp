// NCCL transport on one GPU: the reduction kernel for every dtype x op, the
// stream engine, every collective through `native`, our algorithms through the
// stream engine, CUDA-graph capture and replay, and usage errors.
// Without a CUDA device it prints the reason and exits 77 (ctest: SKIPPED).

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "gpu_test_util.hpp"

#include <comm/comm.hpp>

#include <chrono>
#include <memory>
#include <numeric>
#include <thread>

using namespace comm;
using comm::test::DeviceBuffer;

namespace {

Config one_rank() {
  Config c;
  c.transport = "nccl";
  c.world_size = 1;
  c.rank = 0;
  c.device = 0;
  c.timeout = std::chrono::milliseconds(60'000);
  return c;
}

struct Fixture {
  Config cfg = one_rank();
  std::unique_ptr<Transport> t = create_transport("nccl", TransportInit{0, 1, make_memory_store(), &cfg, nullptr});
  cudaStream_t stream = nullptr;
  Fixture() { test::cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~Fixture() { cudaStreamDestroy(stream); }
  void sync() { test::cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }
  // The plugin's stream engine; the test stops when the plugin was built without one.
  StreamEngine* engine() {
    StreamEngine* e = t->stream_engine();
    REQUIRE_MESSAGE(e != nullptr, "the plugin was built without nvcc: no stream engine");
    return e;
  }
};

// Small exact values; unsigned types get non-negative ones.
double value_a(DataType t, std::size_t i) { return t == DataType::u8 ? double(i % 7) : double(i % 7) - 3; }
double value_b(DataType t, std::size_t i) { return t == DataType::u8 ? double(i % 5 + 1) : double(i % 5) - 2; }

std::vector<std::byte> filled(DataType t, std::size_t n, double (*f)(DataType, std::size_t)) {
  std::vector<std::byte> v(n * dtype_size(t));
  for (std::size_t i = 0; i < n; ++i) test::put(v, t, i, f(t, i));
  return v;
}

// Stream work that holds the stream for `ms` and then writes `values` into pinned host memory,
// which a copy enqueued after it moves to the device: whatever reads that device buffer later in
// stream order sees `values`; whatever runs out of order (or before the host function) does not.
struct LateInput {
  std::vector<std::byte> values;
  std::byte* pinned = nullptr;
  int ms;
  LateInput(std::vector<std::byte> v, int delay_ms) : values(std::move(v)), ms(delay_ms) {
    test::cuda_ok(cudaMallocHost(reinterpret_cast<void**>(&pinned), values.size()), "cudaMallocHost");
    std::fill(pinned, pinned + values.size(), std::byte{0});
  }
  ~LateInput() { cudaFreeHost(pinned); }
  LateInput(const LateInput&) = delete;
  LateInput& operator=(const LateInput&) = delete;
  static void CUDART_CB run(void* self) {
    auto* l = static_cast<LateInput*>(self);
    std::this_thread::sleep_for(std::chrono::milliseconds(l->ms));
    std::copy(l->values.begin(), l->values.end(), l->pinned);
  }
  void enqueue(void* device, cudaStream_t s) {
    test::cuda_ok(cudaLaunchHostFunc(s, &LateInput::run, this), "cudaLaunchHostFunc");
    test::cuda_ok(cudaMemcpyAsync(device, pinned, values.size(), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("reduction kernel: every dtype x op against a host reference") {
  Fixture f;
  StreamEngine* engine = f.engine();
  std::uint64_t seq = 0;
  for (DataType t : kAllDataTypes)
    for (ReduceOp op : kAllReduceOps)
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1003}}) {
        CAPTURE(to_string(t));
        CAPTURE(to_string(op));
        CAPTURE(n);
        const std::size_t es = dtype_size(t);
        ScheduleBuilder b;
        b.reduce({BufferId::output, 0, n}, {BufferId::input, 0, n}, {BufferId::scratch, 0, n});
        b.need_scratch(n);
        const Schedule s = std::move(b).finish();
        DeviceBuffer in(n * es), out(n * es), scratch(n * es);
        in.upload(filled(t, n, value_a));
        scratch.upload(filled(t, n, value_b));
        // avg is checked with a group of 3 so that the division is visible.
        const int group = op == ReduceOp::avg ? 3 : 1;
        engine->enqueue(s, {in.get(), out.get(), scratch.get()}, t, op, group, seq++, f.stream);
        f.sync();
        const auto got = out.download();
        for (std::size_t i = 0; i < n; ++i) {
          const double want = test::reference(value_a(t, i), value_b(t, i), op, t, group);
          const double have = test::get(got, t, i);
          if (std::fabs(have - want) > test::tolerance(t, want)) {
            FAIL_CHECK("element " << i << ": got " << have << ", expected " << want);
            break;
          }
        }
      }
}

TEST_CASE("reduction kernel: destination aliasing an operand") {
  Fixture f;
  StreamEngine* engine = f.engine();
  const std::size_t n = 4099;
  ScheduleBuilder b;
  b.reduce({BufferId::input, 0, n}, {BufferId::input, 0, n}, {BufferId::scratch, 0, n});
  b.copy({BufferId::output, 0, n}, {BufferId::input, 0, n}, {StepId{0}});
  const Schedule s = std::move(b).finish();
  DeviceBuffer in(n * 4), out(n * 4), scratch(n * 4);
  in.upload(filled(DataType::i32, n, value_a));
  scratch.upload(filled(DataType::i32, n, value_b));
  engine->enqueue(s, {in.get(), out.get(), scratch.get()}, DataType::i32, ReduceOp::sum, 1, 0, f.stream);
  f.sync();
  const auto got = out.download();
  for (std::size_t i = 0; i < n; ++i)
    REQUIRE(test::get(got, DataType::i32, i) == value_a(DataType::i32, i) + value_b(DataType::i32, i));
}

TEST_CASE("stream engine: grouped self send/recv, zero-length messages, copy") {
  Fixture f;
  StreamEngine* engine = f.engine();
  const std::size_t n = 1000;
  ScheduleBuilder b;
  b.send(0, {BufferId::input, 0, n}, 1);
  const StepId r = b.recv(0, {BufferId::scratch, 0, n}, 1);
  b.send(0, {BufferId::input, 0, 0}, 2);
  const StepId r0 = b.recv(0, {BufferId::scratch, n, 0}, 2);
  b.reduce({BufferId::output, 0, n}, {BufferId::input, 0, n}, {BufferId::scratch, 0, n}, {r, r0});
  b.copy({BufferId::output, n, n}, {BufferId::scratch, 0, n}, {r});
  b.need_scratch(n);
  const Schedule s = std::move(b).finish();
  DeviceBuffer in(n * 4), out(2 * n * 4);
  void* scratch = engine->allocate_scratch(n * 4);
  in.upload(filled(DataType::f32, n, value_a));
  engine->enqueue(s, {in.get(), out.get(), scratch}, DataType::f32, ReduceOp::sum, 1, 1, f.stream);
  f.sync();
  engine->release_scratch(scratch);
  const auto got = out.download();
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(test::get(got, DataType::f32, i) == 2 * value_a(DataType::f32, i));
    REQUIRE(test::get(got, DataType::f32, n + i) == value_a(DataType::f32, i));
  }
}

TEST_CASE("transport: capabilities, links and the native cost model") {
  Fixture f;
  const TransportCaps caps = f.t->caps();
  CHECK(caps.cuda_memory);
  CHECK_FALSE(caps.host_memory);
  CHECK(caps.stream_ordered);
  CHECK(f.t->link(0).kind == LinkKind::self);
  CHECK_THROWS_AS(f.t->link(1), Error);
  NativeCollectives* native = f.t->native();
  REQUIRE(native != nullptr);
  for (Collective c : kAllCollectives) {
    CHECK(native->algorithms(c) == std::vector<std::string>{"native"});
    const double small = native->predict_us(c, "native", 8);
    const double large = native->predict_us(c, "native", std::size_t{1} << 30);
    CHECK(small > 0);
    CHECK(large >= small);
  }
  Completion done;
  CHECK_THROWS_AS(f.t->isend(0, 0, nullptr, 0, done), Error);
}

TEST_CASE("1-rank communicator: every collective through native") {
  Communicator comm = Communicator::create(one_rank());
  cudaStream_t stream;
  test::cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
  CallOptions o;
  o.algorithm = "native";
  o.stream = stream;
  for (DataType t : kAllDataTypes) {
    CAPTURE(to_string(t));
    const std::size_t n = 777, es = dtype_size(t);
    const auto a = filled(t, n, value_a);
    DeviceBuffer in(n * es), out(n * es);
    in.upload(a);
    auto check_out = [&](const char* what) {
      test::cuda_ok(cudaStreamSynchronize(stream), "sync");
      CHECK_MESSAGE(out.download() == a, what);
      test::cuda_ok(cudaMemset(out.get(), 0, n * es), "memset");
    };
    const ConstView cin{in.get(), n, t, MemoryKind::cuda};
    const View vout{out.get(), n, t, MemoryKind::cuda};
    for (ReduceOp op : kAllReduceOps) {
      comm.allreduce(cin, vout, op, o);
      check_out("allreduce");
      comm.reduce_scatter(cin, vout, op, o);
      check_out("reduce_scatter");
      comm.reduce(cin, vout, op, 0, o);
      check_out("reduce");
    }
    comm.allgather(cin, vout, o);
    check_out("allgather");
    comm.all_to_all(cin, vout, o);
    check_out("all_to_all");
    const std::size_t counts[] = {n}, displs[] = {0};
    comm.all_to_allv(cin, counts, displs, vout, counts, displs, o);
    check_out("all_to_allv");
    test::cuda_ok(cudaMemcpy(out.get(), in.get(), n * es, cudaMemcpyDeviceToDevice), "copy");
    comm.broadcast(vout, 0, o);
    check_out("broadcast");
  }
  comm.barrier(o);
  test::cuda_ok(cudaStreamSynchronize(stream), "sync");
  cudaStreamDestroy(stream);
}

TEST_CASE("1-rank communicator: our algorithms through the stream engine") {
  Communicator comm = Communicator::create(one_rank());
  const std::size_t n = 4097;
  const auto a = filled(DataType::f32, n, value_a);
  DeviceBuffer in(n * 4), out(n * 4);
  in.upload(a);
  for (const std::string& name : comm.algorithms(Collective::allreduce)) {
    CAPTURE(name);
    CallOptions o;
    o.algorithm = name;
    test::cuda_ok(cudaMemset(out.get(), 0, n * 4), "memset");
    try {
      comm.allreduce({in.get(), n, DataType::f32, MemoryKind::cuda}, {out.get(), n, DataType::f32, MemoryKind::cuda},
                     ReduceOp::sum, o);
    } catch (const Error& e) {
      REQUIRE_MESSAGE(e.is_usage(), e.what());
      MESSAGE(name << " not eligible on one rank: " << e.what());
      continue;
    }
    test::cuda_ok(cudaDeviceSynchronize(), "sync");
    CHECK(out.download() == a);
  }
}

TEST_CASE("CUDA graph: capture 100 all-reduces once, replay them 10 times on new data") {
  Communicator comm = Communicator::create(one_rank());
  cudaStream_t stream;
  test::cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  constexpr int kCalls = 100, kReplays = 10;
  const std::size_t n = 1 << 12, bytes = n * 4;
  DeviceBuffer in(bytes * kCalls), out(bytes * kCalls);
  for (const char* algorithm : {"native", "ring"}) {
    CAPTURE(algorithm);
    CallOptions o;
    o.algorithm = algorithm;
    o.stream = stream;
    cudaGraph_t graph = nullptr;
    test::cuda_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    for (int k = 0; k < kCalls; ++k)  // call k reads slice k and writes slice k
      comm.allreduce({static_cast<std::byte*>(in.get()) + k * bytes, n, DataType::f32, MemoryKind::cuda},
                     {static_cast<std::byte*>(out.get()) + k * bytes, n, DataType::f32, MemoryKind::cuda},
                     ReduceOp::sum, o);
    test::cuda_ok(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    test::cuda_ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    for (int round = 0; round < kReplays; ++round) {
      std::vector<std::byte> a(bytes * kCalls);
      for (std::size_t i = 0; i < n * kCalls; ++i) test::put(a, DataType::f32, i, double(i % 1000) + round);
      in.upload(a);
      test::cuda_ok(cudaMemset(out.get(), 0, bytes * kCalls), "memset");
      test::cuda_ok(cudaStreamSynchronize(cudaStreamLegacy), "sync");
      test::cuda_ok(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
      test::cuda_ok(cudaStreamSynchronize(stream), "sync");
      CHECK(out.download() == a);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  cudaStreamDestroy(stream);
}

TEST_CASE("CallOptions::stream: the call waits for earlier work on its stream, and the host does not") {
  Communicator comm = Communicator::create(one_rank());
  cudaStream_t stream;
  test::cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const std::size_t n = 100'003;
  const auto a = filled(DataType::f32, n, value_a);
  for (const char* algorithm : {"native", "ring"}) {
    CAPTURE(algorithm);
    CallOptions o;
    o.algorithm = algorithm;
    o.stream = stream;
    DeviceBuffer in(n * 4), out(n * 4);
    test::cuda_ok(cudaMemset(in.get(), 0, n * 4), "memset");
    test::cuda_ok(cudaStreamSynchronize(cudaStreamLegacy), "sync");
    LateInput late(a, 300);
    late.enqueue(in.get(), stream);
    const auto t0 = std::chrono::steady_clock::now();
    comm.allreduce({in.get(), n, DataType::f32, MemoryKind::cuda}, {out.get(), n, DataType::f32, MemoryKind::cuda},
                   ReduceOp::sum, o);
    const double returned_after = seconds_since(t0);
    const cudaError_t pending = cudaStreamQuery(stream);
    CHECK_MESSAGE(pending == cudaErrorNotReady, "the stream finished before the 300 ms host function could");
    CHECK_MESSAGE(returned_after < 0.15, "allreduce returned after " << returned_after << " s: it waited for the stream");
    test::cuda_ok(cudaStreamSynchronize(stream), "sync");
    CHECK_MESSAGE(out.download() == a, "the all-reduce did not read the input written before it in stream order");
  }
  cudaStreamDestroy(stream);
}

TEST_CASE("usage errors: host memory is refused with a reason") {
  Communicator comm = Communicator::create(one_rank());
  std::vector<float> host(16, 1.0f);
  CallOptions o;
  o.algorithm = "native";
  try {
    comm.allreduce(view(host), ReduceOp::sum, o);
    FAIL("expected comm::Error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::unsupported);
  }
  try {  // mislabelled: host memory passed as MemoryKind::cuda
    comm.allreduce(View{host.data(), host.size(), DataType::f32, MemoryKind::cuda}, ReduceOp::sum, o);
    FAIL("expected comm::Error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).find("not CUDA device memory") != std::string::npos);
  }
  CHECK_FALSE(comm.failed());
}

// Last: it leaves an aborted NCCL communicator's work to drain from the stream.
TEST_CASE("abort() while work is enqueued returns within a second and fails later calls") {
  Communicator comm = Communicator::create(one_rank());
  cudaStream_t stream;
  test::cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const std::size_t n = 4096;
  DeviceBuffer in(n * 4), out(n * 4);
  LateInput late(filled(DataType::f32, n, value_a), 2000);  // the stream is held for 2 s
  late.enqueue(in.get(), stream);
  CallOptions o;
  o.algorithm = "native";
  o.stream = stream;
  Work w = comm.iallreduce({in.get(), n, DataType::f32, MemoryKind::cuda},
                           {out.get(), n, DataType::f32, MemoryKind::cuda}, ReduceOp::sum, o);
  const auto t0 = std::chrono::steady_clock::now();
  comm.abort();
  const double abort_s = seconds_since(t0);
  CHECK_MESSAGE(abort_s < 1.0, "abort() took " << abort_s << " s with work enqueued");
  CHECK(comm.failed());
  try {
    w.wait();
    // An operation already handed to the stream may complete; a later call may not.
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::aborted);
  }
  CHECK_THROWS_AS(comm.allreduce({in.get(), n, DataType::f32, MemoryKind::cuda},
                                 {out.get(), n, DataType::f32, MemoryKind::cuda}, ReduceOp::sum, o),
                  Error);
  // The stream drains (the host function ends; nothing enqueued by NCCL is left spinning).
  const auto drain0 = std::chrono::steady_clock::now();
  cudaError_t s = cudaErrorNotReady;
  while ((s = cudaStreamQuery(stream)) == cudaErrorNotReady && seconds_since(drain0) < 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK_MESSAGE(s != cudaErrorNotReady, "the stream was still busy 10 s after abort()");
  cudaGetLastError();
  cudaStreamDestroy(stream);
}

int main(int argc, char** argv) {
  std::string why;
  if (test::cuda_devices(why) < 1) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return test::kSkip;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
