// Multi-process NCCL suite: one process per GPU (launched by commrun, see
// tests/mp/nccl.cmake). Runs every collective under every algorithm the
// communicator offers (NCCL's `native` and ours through the stream engine) on
// cudaMalloc'd buffers and checks the results against values computed here.
// Configuration comes from the environment commrun sets (COMM_RANK, ...).
// With fewer visible GPUs than ranks every rank prints why and exits 77
// (commrun passes that on; ctest reports the test as skipped).

#include "gpu_test_util.hpp"

#include <comm/comm.hpp>

#include <functional>
#include <string>

using namespace comm;
using comm::test::DeviceBuffer;

namespace {

int passed = 0, failed = 0, skipped = 0;

std::vector<std::byte> make(std::size_t n, const std::function<double(std::size_t)>& f) {
  std::vector<std::byte> v(n * 4);
  for (std::size_t i = 0; i < n; ++i) test::put(v, DataType::f32, i, f(i));
  return v;
}

// Runs one check; a usage error (e.g. an algorithm not eligible for this many
// ranks) is a skip, anything else a failure.
void check(Communicator& comm, const std::string& name, const std::function<bool()>& body) {
  if (comm.failed()) {
    ++failed;
    std::printf("FAIL %s: communicator already failed\n", name.c_str());
    return;
  }
  try {
    if (body()) {
      ++passed;
    } else {
      ++failed;
      std::printf("FAIL %s: wrong values\n", name.c_str());
    }
  } catch (const Error& e) {
    if (e.is_usage()) {
      ++skipped;
      std::printf("skip %s: %s\n", name.c_str(), e.what());
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", name.c_str(), e.what());
    }
  }
}

}  // namespace

int main() {
  std::string why;
  const int gpus = test::cuda_devices(why);
  Config cfg = Config::from_env();
  if (gpus < cfg.world_size) {
    std::printf("SKIPPED: %d ranks need %d CUDA devices on this host: %s\n", cfg.world_size, cfg.world_size,
                gpus < 0 ? why.c_str() : (std::to_string(gpus) + " visible").c_str());
    return test::kSkip;
  }
  cfg.transport = "nccl";
  Communicator comm = Communicator::create(cfg);
  const int r = comm.rank(), n = comm.size();
  const auto nn = static_cast<std::size_t>(n);
  cudaStream_t stream;
  test::cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
  auto dv = [](const DeviceBuffer& b, std::size_t count) { return View{b.get(), count, DataType::f32, MemoryKind::cuda}; };
  auto sync = [&] { test::cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); };

  for (std::size_t count : {std::size_t{1}, std::size_t{1027}, std::size_t{262147}}) {
    const std::string sz = " count=" + std::to_string(count);
    for (const std::string& alg : comm.algorithms(Collective::allreduce)) {
      CallOptions o{alg, {}, 0, stream};
      check(comm, "allreduce " + alg + sz, [&] {
        DeviceBuffer in(count * 4), out(count * 4);
        in.upload(make(count, [&](std::size_t i) { return double(i % 13) + r; }));
        comm.allreduce(dv(in, count), dv(out, count), ReduceOp::sum, o);
        sync();
        return out.download() == make(count, [&](std::size_t i) { return n * double(i % 13) + n * (n - 1) / 2.0; });
      });
    }
    for (const std::string& alg : comm.algorithms(Collective::reduce_scatter)) {
      CallOptions o{alg, {}, 0, stream};
      check(comm, "reduce_scatter " + alg + sz, [&] {
        DeviceBuffer in(nn * count * 4), out(count * 4);
        in.upload(make(nn * count, [&](std::size_t i) { return double(i % 13) + r; }));
        comm.reduce_scatter(dv(in, nn * count), dv(out, count), ReduceOp::sum, o);
        sync();
        return out.download() == make(count, [&](std::size_t i) {
                 return n * double((r * count + i) % 13) + n * (n - 1) / 2.0;
               });
      });
    }
    for (const std::string& alg : comm.algorithms(Collective::allgather)) {
      CallOptions o{alg, {}, 0, stream};
      check(comm, "allgather " + alg + sz, [&] {
        DeviceBuffer in(count * 4), out(nn * count * 4);
        in.upload(make(count, [&](std::size_t i) { return double(i % 13) + 100 * r; }));
        comm.allgather(dv(in, count), dv(out, nn * count), o);
        sync();
        return out.download() == make(nn * count, [&](std::size_t i) { return double(i % count % 13) + 100.0 * (i / count); });
      });
    }
    for (const std::string& alg : comm.algorithms(Collective::broadcast)) {
      CallOptions o{alg, {}, 0, stream};
      const int root = n - 1;
      check(comm, "broadcast " + alg + sz, [&] {
        DeviceBuffer buf(count * 4);
        buf.upload(make(count, [&](std::size_t i) { return r == root ? double(i % 17) : -1.0; }));
        comm.broadcast(dv(buf, count), root, o);
        sync();
        return buf.download() == make(count, [&](std::size_t i) { return double(i % 17); });
      });
    }
    for (const std::string& alg : comm.algorithms(Collective::reduce)) {
      CallOptions o{alg, {}, 0, stream};
      check(comm, "reduce " + alg + sz, [&] {
        DeviceBuffer in(count * 4), out(count * 4);
        in.upload(make(count, [&](std::size_t i) { return double(i % 13) * (r + 1); }));
        comm.reduce(dv(in, count), dv(out, count), ReduceOp::max, 0, o);
        sync();
        return r != 0 || out.download() == make(count, [&](std::size_t i) { return double(i % 13) * n; });
      });
    }
    for (const std::string& alg : comm.algorithms(Collective::all_to_all)) {
      CallOptions o{alg, {}, 0, stream};
      check(comm, "all_to_all " + alg + sz, [&] {
        DeviceBuffer in(nn * count * 4), out(nn * count * 4);
        in.upload(make(nn * count, [&](std::size_t i) { return 1000.0 * r + 10.0 * (i / count) + double(i % count % 7); }));
        comm.all_to_all(dv(in, nn * count), dv(out, nn * count), o);
        sync();
        return out.download() == make(nn * count, [&](std::size_t i) {
                 return 1000.0 * (i / count) + 10.0 * r + double(i % count % 7);
               });
      });
    }
  }
  for (const std::string& alg : comm.algorithms(Collective::barrier)) {
    CallOptions o{alg, {}, 0, stream};
    check(comm, "barrier " + alg, [&] {
      comm.barrier(o);
      sync();
      return true;
    });
  }
  if (n >= 2) {
    check(comm, "send/recv ring", [&] {
      const std::size_t count = 4099;
      DeviceBuffer out(count * 4), in(count * 4);
      out.upload(make(count, [&](std::size_t i) { return double(i % 11) + r; }));
      CallOptions o{{}, {}, 0, stream};
      // Even ranks send first, odd ranks receive first: no cycle of blocked sends.
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      if (r % 2 == 0) {
        comm.send(dv(out, count), next, o);
        comm.recv(dv(in, count), prev, o);
      } else {
        comm.recv(dv(in, count), prev, o);
        comm.send(dv(out, count), next, o);
      }
      sync();
      return in.download() == make(count, [&](std::size_t i) { return double(i % 11) + prev; });
    });
  }
  cudaStreamDestroy(stream);
  std::printf("rank %d: %d passed, %d failed, %d skipped\n", r, passed, failed, skipped);
  return failed ? 1 : 0;
}
