// Links the packaged comm and runs a 4-rank all-reduce over the local
// transport (ranks are threads of this process), checking every element.
#include <comm/comm.hpp>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

int main() {
  constexpr int kRanks = 4;
  constexpr std::size_t kCount = 1000;
  auto store = comm::make_memory_store();
  std::vector<int> wrong(kRanks, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      try {
        comm::Config cfg;
        cfg.rank = r;
        cfg.world_size = kRanks;
        cfg.transport = "local";
        cfg.timeout = std::chrono::seconds(60);  // a failed rank must not leave the others waiting for long
        comm::Communicator c = comm::Communicator::create(cfg, store);
        std::vector<float> x(kCount);
        for (std::size_t i = 0; i < kCount; ++i) x[i] = static_cast<float>((r + 1) * (i % 7));
        c.allreduce(comm::view(x), comm::ReduceOp::sum);
        int bad = 0;  // sum over r of (r + 1) is 10
        for (std::size_t i = 0; i < kCount; ++i) bad += x[i] != static_cast<float>(10 * (i % 7));
        wrong[r] = bad;
      } catch (const comm::Error& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r)
    if (wrong[r] != 0) {
      std::printf("comm test_package: rank %d: %d wrong elements%s\n", r, wrong[r], wrong[r] < 0 ? " (failed)" : "");
      return 1;
    }
  std::printf("comm test_package: 4-rank all-reduce over the local transport: ok\n");
  return 0;
}
