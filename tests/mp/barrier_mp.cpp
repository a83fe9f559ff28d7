// comm-mp-barrier: barrier semantics across real processes (run it under
// commrun with 6-9 ranks). The ranks share a small file mapped into every
// process; before its i-th barrier a rank stores i in its slot, and after the
// barrier it checks that every rank's slot is at least i: a barrier that
// returns before all ranks entered shows up as a slot still at i-1. In every
// round one rank (a different one each time) enters a few milliseconds late,
// so an early return is not left to chance.
//
//   comm-mp-barrier [--rounds K]      (default 40 per algorithm)
//
// Exit status: 0 pass, 1 fail, 77 the transport is not available.

#include "mp_test_util.hpp"

#include <comm/comm.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kMaxRanks = 64;

// The shared slots: one 64-bit counter per rank, in a file every rank maps.
class SharedSlots {
 public:
  explicit SharedSlots(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
    if (fd < 0) throw std::runtime_error("open " + path + ": " + std::strerror(errno));
    const std::size_t bytes = kMaxRanks * sizeof(std::uint64_t);
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      ::close(fd);
      throw std::runtime_error("ftruncate " + path + ": " + std::strerror(errno));
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) throw std::runtime_error("mmap " + path + ": " + std::strerror(errno));
    slots_ = static_cast<std::uint64_t*>(p);
  }
  ~SharedSlots() { ::munmap(slots_, kMaxRanks * sizeof(std::uint64_t)); }
  SharedSlots(const SharedSlots&) = delete;
  SharedSlots& operator=(const SharedSlots&) = delete;

  void store(int rank, std::uint64_t v) {
    std::atomic_ref<std::uint64_t>(slots_[rank]).store(v, std::memory_order_seq_cst);
  }
  std::uint64_t load(int rank) const {
    return std::atomic_ref<std::uint64_t>(slots_[rank]).load(std::memory_order_seq_cst);
  }

 private:
  std::uint64_t* slots_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int rounds = 40;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: comm-mp-barrier [--rounds K]\n");
      return 2;
    }
  }
  const comm::Config cfg = comm::Config::from_env();
  comm::Communicator c = mptest::create_or_exit(cfg);
  const int n = c.size(), r = c.rank();
  if (n > kMaxRanks) {
    std::printf("FAIL: at most %d ranks\n", kMaxRanks);
    return 1;
  }
  // One file per job, named after commrun's store token (else the store address).
  std::string job = cfg.store_token.empty() ? cfg.store : cfg.store_token;
  for (char& ch : job)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  const std::string path = (std::filesystem::temp_directory_path() / ("comm-mp-barrier-" + job)).string();
  try {
    SharedSlots slots(path);
    // Everyone has mapped the file once this all-reduce is done; the mappings
    // outlive the name, so nothing is left behind even if a rank dies later.
    std::int64_t one = 1, joined = 0;
    c.allreduce(comm::ConstView{&one, 1, comm::DataType::i64}, comm::View{&joined, 1, comm::DataType::i64},
                comm::ReduceOp::sum);
    if (r == 0) ::unlink(path.c_str());
    // Automatic selection first, then every barrier algorithm by name.
    std::vector<std::string> algos = c.algorithms(comm::Collective::barrier);
    algos.insert(algos.begin(), "");
    std::uint64_t i = 0;
    bool ok = joined == n;
    for (const std::string& algo : algos) {
      comm::CallOptions opts;
      opts.algorithm = algo;
      std::int64_t early = 0;
      for (int k = 0; k < rounds; ++k) {
        ++i;
        if (r == static_cast<int>(i % static_cast<std::uint64_t>(n)))
          std::this_thread::sleep_for(std::chrono::milliseconds(2 + i % 3));
        slots.store(r, i);
        c.barrier(opts);
        for (int q = 0; q < n; ++q) {
          const std::uint64_t seen = slots.load(q);
          if (seen >= i) continue;
          if (++early <= 5)
            std::printf("FAIL: rank %d left barrier #%llu (%s) before rank %d entered it (its slot says %llu)\n", r,
                        static_cast<unsigned long long>(i), algo.empty() ? "auto" : algo.c_str(), q,
                        static_cast<unsigned long long>(seen));
        }
      }
      std::int64_t total = 0;
      c.allreduce(comm::ConstView{&early, 1, comm::DataType::i64}, comm::View{&total, 1, comm::DataType::i64},
                  comm::ReduceOp::sum);
      if (r == 0)
        std::printf("comm-mp-barrier: %d ranks over '%s', %d barriers (%s): %lld early returns\n", n,
                    std::string(c.transport_name()).c_str(), rounds, algo.empty() ? "auto" : algo.c_str(),
                    static_cast<long long>(total));
      ok = ok && total == 0;
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAIL: rank %d: %s\n", r, e.what());
    ::unlink(path.c_str());
    return 1;
  }
}
