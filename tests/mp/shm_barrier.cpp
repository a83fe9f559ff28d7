// comm-shm-barrier: a barrier lets nobody out before everyone is in. Each
// rank enters after a pseudo-random delay (a different rank is last each
// round), notes CLOCK_MONOTONIC (one clock for every process of the host) on
// entry and exit, and after the rounds the ranks gather the times: every
// exit must come after every entry of the same round. A barrier that let a
// rank through early would show an exit before the late rank's entry.
//
//   comm-shm-barrier [--algo NAME] [--rounds N]
// Exit status: 0 pass, 1 fail, 77 the transport is not available.

#include "mp_test_util.hpp"

#include <comm/comm.hpp>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace {

std::int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  std::string algo = "auto";
  int rounds = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--algo") algo = argv[i + 1];
    else if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: comm-shm-barrier [--algo NAME] [--rounds N]\n");
      return 2;
    }
  }
  comm::Communicator c = mptest::create_or_exit(comm::Config::from_env());
  const int n = c.size(), r = c.rank();
  comm::CallOptions o;
  o.algorithm = algo;
  std::vector<std::int64_t> times(2 * static_cast<std::size_t>(rounds));  // entry, exit per round
  for (int k = 0; k < rounds; ++k) {
    // The late rank of round k sleeps 200 us; the others enter at once.
    if (k % n == r) std::this_thread::sleep_for(std::chrono::microseconds(200));
    times[2 * static_cast<std::size_t>(k)] = now_ns();
    c.barrier(o);
    times[2 * static_cast<std::size_t>(k) + 1] = now_ns();
  }
  std::vector<std::int64_t> all(times.size() * static_cast<std::size_t>(n));
  c.allgather(comm::view(times), comm::view(all));
  int bad = 0;
  for (int k = 0; k < rounds; ++k) {
    std::int64_t last_in = 0, first_out = INT64_MAX;
    int late = -1, early = -1;
    for (int p = 0; p < n; ++p) {
      const std::size_t base = static_cast<std::size_t>(p) * times.size() + 2 * static_cast<std::size_t>(k);
      if (all[base] > last_in) last_in = all[base], late = p;
      if (all[base + 1] < first_out) first_out = all[base + 1], early = p;
    }
    if (first_out < last_in && bad++ < 5)
      std::printf("FAIL round %d: rank %d left the barrier %lld ns before rank %d entered it\n", k, early,
                  static_cast<long long>(last_in - first_out), late);
  }
  c.barrier();
  std::printf("comm-shm-barrier: rank %d: %d rounds of %s on %d ranks, %d violations\n", r, rounds,
              std::string(algo).c_str(), n, bad);
  return bad ? 1 : 0;
}
