// A program built against an INSTALLED comm, three ways: CMake's
// find_package (tests/consumer/CMakeLists.txt), pkg-config
// (check_pkgconfig.cmake) and Conan (conan/test_package builds this file).
// Four ranks as threads over the `local` transport, through the installed
// headers and library: every element of the all-reduce is checked. The build
// says what it expects of the package (COMM_CONSUMER_VERSION, and
// COMM_CONSUMER_TRANSPORTS, comma-separated); the program checks that the
// library it runs with agrees.
#include <comm/comm.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#ifndef COMM_CONSUMER_TRANSPORTS
#define COMM_CONSUMER_TRANSPORTS ""
#endif

namespace {

// The package promised these transports (its components); they must be there.
int check_package() {
  int bad = 0;
#ifdef COMM_CONSUMER_VERSION
  if (comm::version() != COMM_CONSUMER_VERSION) {
    std::printf("consumer: the package says version %s, the library %s\n", COMM_CONSUMER_VERSION,
                std::string(comm::version()).c_str());
    ++bad;
  }
#endif
  const std::vector<std::string> have = comm::available_transports();
  const std::string_view wanted = COMM_CONSUMER_TRANSPORTS;
  for (std::size_t start = 0; start < wanted.size();) {
    const std::size_t end = std::min(wanted.find(',', start), wanted.size());
    const std::string t(wanted.substr(start, end - start));
    start = end + 1;
    if (t.empty() || std::find(have.begin(), have.end(), t) != have.end()) continue;
    std::printf("consumer: transport '%s' is a component of the package but unavailable: %s\n", t.c_str(),
                comm::transport_unavailable_reason(t).c_str());
    ++bad;
  }
  return bad;
}

}  // namespace

int main() {
  if (check_package() != 0) return 1;
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
        cfg.timeout = std::chrono::seconds(60);  // a failed rank must not leave the others waiting for long
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
  std::printf("consumer: comm %s, transports %s: 4-rank all-reduce over the installed comm: ok\n",
              std::string(comm::version()).c_str(), COMM_CONSUMER_TRANSPORTS);
  return 0;
}
