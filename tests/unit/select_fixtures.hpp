#pragma once
// Helpers of the selection tests: a uniform link matrix, and ranks as threads
// that each own a `local` transport (what calibration and tuning drive).

#include "select/cost_model.hpp"
#include "../thread_ranks.hpp"

#include <comm/comm.hpp>
#include <doctest/doctest.h>

#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace comm::test {

// Checks the four figures of a link that a tuning file carries.
inline void check_link_figures(const LinkInfo& l, double alpha_us, double beta_gbps, std::size_t rndv_threshold_bytes,
                               double rndv_extra_us) {
  CHECK(l.alpha_us == alpha_us);
  CHECK(l.beta_gbps == beta_gbps);
  CHECK(l.rndv_threshold_bytes == rndv_threshold_bytes);
  CHECK(l.rndv_extra_us == rndv_extra_us);
}

// n x n: self links on the diagonal, `kind` with alpha/beta everywhere else.
inline LinkMatrix uniform_links(int n, LinkKind kind, double alpha, double beta, const std::string& detail = "test") {
  LinkMatrix m;
  m.n = n;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      m.links.push_back(a == b ? LinkInfo{LinkKind::self, 0, 1, "self"} : LinkInfo{kind, alpha, beta, detail});
  return m;
}

// Runs body(rank, transport, store) on n threads, each with its own `local`
// transport over one memory store; transports live until every rank's body
// returned (as communicators would). Rethrows the first exception.
inline void run_transports(int n, const Config& base,
                           const std::function<void(int, Transport&, Store&, const Config&)>& body) {
  auto store = make_memory_store();
  on_threads(n, [&](int r) {
    Config cfg = base;
    cfg.rank = r;
    cfg.world_size = n;
    auto t = create_transport("local", {r, n, store, &cfg, nullptr});
    try {
      body(r, *t, *store, cfg);
    } catch (...) {
      store->add("test/done", 1);
      throw;
    }
    store->add("test/done", 1);
    while (store->add("test/done", 0) < n) std::this_thread::yield();
  });
}

}  // namespace comm::test
