// comm-store-mp: the bootstrap stores across real processes (run under commrun).
//
//   comm-store-mp            the TCP store commrun configures (rank 0 serves, token on)
//   comm-store-mp --file DIR a file store in DIR shared by the ranks
//
// Every rank counts itself in with add(), publishes a value, waits for the
// others, reads their values and checks the counter. Ranks leave only after
// all have read, and rank 0 leaves last: its server must outlive its clients.
// Exit status: 0 pass, 1 fail.

#include <comm/comm.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

std::string value_of(int rank) { return "value-of-rank-" + std::to_string(rank) + std::string(static_cast<std::size_t>(rank) * 1000, 'x'); }

}  // namespace

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  const comm::Config cfg = comm::Config::from_env();
  const int r = cfg.rank, n = cfg.world_size;
  std::string file_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--file" && i + 1 < argc) {
      file_dir = argv[++i];
    } else {
      std::fprintf(stderr, "usage: comm-store-mp [--file DIR]\n");
      return 2;
    }
  }
  try {
    auto store = file_dir.empty() ? comm::make_store(cfg) : comm::make_file_store(file_dir);
    // Count in before publishing: whoever sees every value then sees the full count.
    store->add("arrived", 1);
    store->set("rank/" + std::to_string(r), value_of(r));
    std::vector<std::string> keys;
    for (int q = 0; q < n; ++q) keys.push_back("rank/" + std::to_string(q));
    store->wait(keys, 60s);
    int bad = 0;
    for (int q = 0; q < n; ++q) {
      const std::string got = store->get("rank/" + std::to_string(q), 10s);
      if (got != value_of(q)) {
        std::printf("FAIL: rank %d read %zu bytes for rank %d, expected %zu\n", r, got.size(), q, value_of(q).size());
        ++bad;
      }
    }
    const std::int64_t arrived = store->add("arrived", 0);
    if (arrived != n) {
      std::printf("FAIL: rank %d: counter is %lld after everyone arrived, expected %d\n", r,
                  static_cast<long long>(arrived), n);
      ++bad;
    }
    // Rank 0's server must outlive its clients: everyone waits until all have
    // read, then the others report leaving and rank 0 waits for that.
    if (store->add("done", 1) == n) store->set("all-done", "1");
    store->wait({"all-done"}, 60s);
    if (r != 0) {
      if (store->add("left", 1) == n - 1) store->set("all-left", "1");
    } else if (n > 1) {
      store->wait({"all-left"}, 60s);
    }
    std::printf("rank %d: %s store: %d of %d values correct, counter %lld\n", r, file_dir.empty() ? "tcp" : "file",
                n - bad, n, static_cast<long long>(arrived));
    return bad == 0 ? 0 : 1;
  } catch (const comm::Error& e) {
    std::printf("FAIL: rank %d: %s\n", r, e.what());
    return 1;
  }
}
