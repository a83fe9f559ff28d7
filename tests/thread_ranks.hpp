#pragma once
// Ranks as threads of one test process (tests/unit and the in-process parts
// of tests/mp).

#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace comm::test {

// Runs fn(rank) for every rank in [0, n), each on its own thread; once all
// have returned, rethrows the first exception any of them threw.
inline void on_threads(int n, const std::function<void(int)>& fn) {
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        std::lock_guard lk(mu);
        if (!first) first = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace comm::test
