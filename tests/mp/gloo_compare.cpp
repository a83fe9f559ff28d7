// comm-gloo-compare: our algorithms on the gloo transport against Gloo's own
// all-reduce, measured side by side in one job, every result checked.
//
//   COMM_TRANSPORT=gloo commrun -n 2 comm-gloo-compare [bytes] [iterations] [algorithms...]
//     one size (default 16 MiB, 10 iterations, ring native native_bcube)
//   COMM_TRANSPORT=gloo commrun -n 2 comm-gloo-compare --sweep MIN MAX FACTOR ITERS
//     per size: Gloo's own allreduce (its own context over the same store,
//     options API, plain float sum, Gloo barriers between iterations) and
//     every algorithm of the gloo transport plus auto, interleaved per size;
//     one line per size on rank 0: "bytes own_us <algorithm>_us ...", then
//     the slowest algorithm's, native's and auto's ratio to Gloo's own.
// Time: median over iterations of the slowest rank, as comm-bench.
// Exit status: 0 pass, 1 fail (wrong result or error), 77 skipped (no Gloo).
#include <comm/comm.hpp>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: FAIL: %s\n", rank, what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

float input(std::size_t i, int rank) { return static_cast<float>((i * 7 + static_cast<std::size_t>(rank) * 3) % 64); }

// Small integers: every order of summation gives the exact same float.
void check(const std::vector<float>& out, int n, int me, const std::string& what) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    float expect = 0;
    for (int r = 0; r < n; ++r) expect += input(i, r);
    if (out[i] != expect)
      fail(me, what + ": element " + std::to_string(i) + " is " + std::to_string(out[i]) + ", expected " +
                   std::to_string(expect));
  }
}

// Gloo's rendezvous store over ours.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(std::shared_ptr<comm::Store> s) : s_(std::move(s)) {}
  void set(const std::string& k, const std::vector<char>& v) override { s_->set(k, std::string(v.begin(), v.end())); }
  std::vector<char> get(const std::string& k) override {
    const std::string v = s_->get(k, std::chrono::seconds(60));
    return {v.begin(), v.end()};
  }
  void wait(const std::vector<std::string>& keys) override { s_->wait(keys, std::chrono::seconds(60)); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override { s_->wait(keys, t); }

 private:
  std::shared_ptr<comm::Store> s_;
};

// Median of the per-iteration times, each the slowest rank's.
double median_of_slowest(comm::Communicator& c, std::vector<double> us) {
  c.allreduce(comm::view(us), comm::ReduceOp::max);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

double time_iterations(comm::Communicator& c, int iters, const std::function<void()>& sync,
                       const std::function<void()>& op) {
  op();  // warm-up
  std::vector<double> us;
  for (int it = 0; it < iters; ++it) {
    sync();
    const auto t0 = Clock::now();
    op();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return median_of_slowest(c, std::move(us));
}

int sweep(comm::Communicator& c, const std::shared_ptr<comm::Store>& store, const comm::Config& cfg,
          std::size_t min_bytes, std::size_t max_bytes, double factor, int iters) {
  const int n = c.size(), me = c.rank();
  gloo::transport::tcp::attr attr;
  attr.hostname = cfg.iface.empty() ? "127.0.0.1" : cfg.iface;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto own = std::make_shared<gloo::rendezvous::Context>(me, n);
  GlooStore gs(comm::make_prefix_store(store, "gloo-own/"));
  own->connectFullMesh(gs, device);
  std::vector<std::string> names = c.algorithms(comm::Collective::allreduce);
  names.push_back("auto");
  if (me == 0) {
    std::printf("# bytes own_us");
    for (const auto& a : names) std::printf(" %s_us", a.c_str());
    std::printf(" worst/own native/own auto/own\n");
  }
  for (double b = static_cast<double>(min_bytes);; b *= factor) {
    const std::size_t bytes = std::min(static_cast<std::size_t>(b), max_bytes);
    const std::size_t count = std::max<std::size_t>(1, bytes / sizeof(float));
    std::vector<float> in(count), out(count);
    for (std::size_t i = 0; i < count; ++i) in[i] = input(i, me);
    const double own_us = time_iterations(
        c, iters,
        [&] {
          gloo::BarrierOptions o(own);
          o.setTag(1);
          gloo::barrier(o);
        },
        [&] {
          gloo::AllreduceOptions o(own);
          o.setInput(in.data(), count);
          o.setOutput(out.data(), count);
          o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
          o.setTag(0);
          gloo::allreduce(o);
        });
    check(out, n, me, "Gloo's own allreduce");
    std::vector<double> ours;
    for (const auto& a : names) {
      comm::CallOptions o;
      o.algorithm = a;
      ours.push_back(time_iterations(
          c, iters, [&] { c.barrier(); },
          [&] { c.allreduce(comm::view(in), comm::view(out), comm::ReduceOp::sum, o); }));
      check(out, n, me, a);
    }
    if (me == 0) {
      std::printf("%zu %.2f", count * sizeof(float), own_us);
      for (double us : ours) std::printf(" %.2f", us);
      const auto native = std::find(names.begin(), names.end(), "native") - names.begin();
      std::printf(" %.3f %.3f %.3f\n", *std::max_element(ours.begin(), ours.end()) / own_us,
                  ours[static_cast<std::size_t>(native)] / own_us, ours.back() / own_us);
      std::fflush(stdout);
    }
    if (bytes >= max_bytes) break;
  }
  return 0;
}

int one_size(comm::Communicator& c, std::size_t bytes, int iters, std::vector<std::string> algorithms) {
  const int n = c.size(), me = c.rank();
  if (algorithms.empty()) algorithms = {"ring", "native", "native_bcube"};
  const std::size_t count = bytes / sizeof(float);
  std::vector<float> in(count), out(count);
  for (std::size_t i = 0; i < count; ++i) in[i] = input(i, me);
  for (const auto& algorithm : algorithms) {
    comm::CallOptions opts;
    opts.algorithm = algorithm;
    const double ms = time_iterations(
                          c, iters, [&] { c.barrier(); },
                          [&] { c.allreduce(comm::view(in), comm::view(out), comm::ReduceOp::sum, opts); }) /
                      1e3;
    check(out, n, me, algorithm);
    const double algbw = static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
    if (me == 0)
      std::printf("allreduce %zu B x %d ranks, %-13s median %8.2f ms  algbw %.2f GB/s  busbw %.2f GB/s\n", bytes, n,
                  algorithm.c_str(), ms, algbw, algbw * 2.0 * (n - 1) / n);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const auto available = comm::available_transports();
  if (std::find(available.begin(), available.end(), "gloo") == available.end()) {
    std::printf("SKIPPED: %s\n", comm::transport_unavailable_reason("gloo").c_str());
    return 77;
  }
  comm::Config cfg = comm::Config::from_env();
  try {
    if (argc > 1 && std::string(argv[1]) == "--sweep") {
      if (argc != 6) fail(cfg.rank, "usage: comm-gloo-compare --sweep MIN MAX FACTOR ITERS");
      auto store = comm::make_store(cfg);
      comm::Communicator c = comm::Communicator::create(cfg, store);
      return sweep(c, store, cfg, comm::parse_bytes(argv[2], "MIN"), comm::parse_bytes(argv[3], "MAX"),
                   std::atof(argv[4]), std::atoi(argv[5]));
    }
    comm::Communicator c = comm::Communicator::create(cfg);
    const std::size_t bytes = argc > 1 ? comm::parse_bytes(argv[1], "bytes") : std::size_t{16} << 20;
    std::vector<std::string> algorithms(argv + std::min(argc, 3), argv + argc);
    return one_size(c, bytes, argc > 2 ? std::atoi(argv[2]) : 10, algorithms);
  } catch (const comm::Error& e) {
    fail(cfg.rank, std::string(comm::to_string(e.code())) + ": " + e.what());
  }
}
