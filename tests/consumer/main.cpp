// Four ranks as threads over the `local` transport, through the installed
// headers and library: every element of the all-reduce is checked.
#include <comm/comm.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

int main() {
  constexpr int kRanks = 4;
  constexpr std::size_t kCount = 4099;  // not a multiple of the rank count
  auto store = comm::make_memory_store();
  std::vector<long> wrong(kRanks, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      try {
        comm::Config cfg;
        cfg.rank = r;
        cfg.world_size = kRanks;
        cfg.transport = "local";
        cfg.timeout = std::chrono::seconds(60);
        comm::Communicator c = comm::Communicator::create(cfg, store);
        std::vector<std::int32_t> x(kCount);
        for (std::size_t i = 0; i < kCount; ++i) x[i] = static_cast<std::int32_t>(i) * (r + 1);
        c.allreduce(comm::view(x), comm::ReduceOp::sum);
        long bad = 0;  // sum over r of i * (r + 1) = 10 i
        for (std::size_t i = 0; i < kCount; ++i) bad += x[i] != static_cast<std::int32_t>(10 * i);
        wrong[static_cast<std::size_t>(r)] = bad;
      } catch (const comm::Error& e) {
        std::fprintf(stderr, "consumer: rank %d: %s\n", r, e.what());
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r)
    if (wrong[static_cast<std::size_t>(r)] != 0) {
      std::printf("consumer: rank %d FAILED (%ld wrong elements; -1: no result)\n", r, wrong[static_cast<std::size_t>(r)]);
      return 1;
    }
  std::printf("consumer: 4-rank all-reduce over the installed comm: ok\n");
  return 0;
}
