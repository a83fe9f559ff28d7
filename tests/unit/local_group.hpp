#pragma once
// Runs a function on N ranks that are threads of this process, each with its
// own Communicator meeting through one memory store; with no transport named
// the peer table makes that `local`.
// An exception on any rank is rethrown (the first one) after all threads end;
// the other ranks' communicators are aborted so they cannot hang.

#include <comm/comm.hpp>

#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace comm::test {

// calibrate: keep base.calibrate (start-up calibration); otherwise it is off,
// since unit tests measure semantics, not this machine.
inline void run_local(int nranks, const Config& base, const std::function<void(Communicator&)>& body,
                      bool calibrate = false) {
  auto store = make_memory_store();
  std::vector<std::thread> threads;
  std::mutex mu;
  std::exception_ptr first;
  std::vector<Communicator*> live(static_cast<std::size_t>(nranks), nullptr);
  auto abort_all = [&] {
    for (auto* c : live)
      if (c) c->abort();
  };
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        Config cfg = base;
        cfg.rank = r;
        cfg.world_size = nranks;
        cfg.calibrate = calibrate && base.calibrate;
        Communicator c = Communicator::create(cfg, store);
        {
          std::lock_guard lk(mu);
          live[static_cast<std::size_t>(r)] = &c;
          if (first) c.abort();
        }
        try {
          body(c);
        } catch (...) {
          std::lock_guard lk(mu);
          live[static_cast<std::size_t>(r)] = nullptr;
          throw;
        }
        std::lock_guard lk(mu);
        live[static_cast<std::size_t>(r)] = nullptr;
      } catch (...) {
        std::lock_guard lk(mu);
        if (!first) first = std::current_exception();
        abort_all();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

inline void run_local(int nranks, const std::function<void(Communicator&)>& body) {
  run_local(nranks, Config{}, body);
}

}  // namespace comm::test
