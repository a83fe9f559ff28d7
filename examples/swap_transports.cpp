// swap_transports: the same program over any transport.
//
// Runs allreduce, allgather, reduce_scatter, broadcast and all_to_all on
// deterministic inputs and prints one checksum per collective. Nothing in the
// code names a transport: it comes from COMM_TRANSPORT (or --transport), so
// the checksums printed under local, ucx, ofi and gloo must be identical for
// the same number of ranks. The inputs are small integers, exactly
// representable, so sums are exact in any order: whichever algorithm each
// transport ends up with, the bits are the same. Each result is also checked
// against values computed here independently.
//
// Run: commrun -n 2 --transport ucx build/bin/swap_transports
//      build/bin/swap_transports --threads 2          (ranks as threads, local transport)

#include "util/cli.hpp"

#include <comm/comm.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

// Element i of rank r's input: a small integer in [-8, 8].
float input(int r, std::size_t i) { return static_cast<float>(static_cast<int>((r * 7 + i * 13) % 17) - 8); }

std::vector<float> inputs(int r, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = input(r, i);
  return v;
}

std::uint64_t fnv1a(const void* data, std::size_t bytes, std::uint64_t h = 0xcbf29ce484222325ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

struct Check {
  std::string name;
  std::vector<float> result;    // this rank's output
  std::vector<float> expected;  // computed without communication
};

// Runs the five collectives on one rank and returns what each produced.
std::vector<Check> run_collectives(comm::Communicator& c, std::size_t count) {
  const int n = c.size();
  const int me = c.rank();
  const auto nn = static_cast<std::size_t>(n);
  std::vector<Check> out;

  {  // allreduce: out[i] = sum over ranks of input(r, i)
    Check k{"allreduce", std::vector<float>(count), std::vector<float>(count, 0.0f)};
    const std::vector<float> in = inputs(me, count);
    c.allreduce(comm::view(in), comm::view(k.result), comm::ReduceOp::sum);
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < count; ++i) k.expected[i] += input(r, i);
    out.push_back(std::move(k));
  }
  {  // allgather: block r is rank r's input
    Check k{"allgather", std::vector<float>(count * nn), {}};
    const std::vector<float> in = inputs(me, count);
    c.allgather(comm::view(in), comm::view(k.result));
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < count; ++i) k.expected.push_back(input(r, i));
    out.push_back(std::move(k));
  }
  {  // reduce_scatter: rank me gets block me of the element-wise sum
    Check k{"reduce_scatter", std::vector<float>(count), std::vector<float>(count, 0.0f)};
    const std::vector<float> in = inputs(me, count * nn);
    c.reduce_scatter(comm::view(in), comm::view(k.result), comm::ReduceOp::sum);
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < count; ++i) k.expected[i] += input(r, static_cast<std::size_t>(me) * count + i);
    out.push_back(std::move(k));
  }
  {  // broadcast from the last rank (not 0, so a root mix-up shows)
    const int root = n - 1;
    Check k{"broadcast", inputs(me, count), inputs(root, count)};
    c.broadcast(comm::view(k.result), root);
    out.push_back(std::move(k));
  }
  {  // all_to_all: block j of rank i's input becomes block i of rank j's output
    Check k{"all_to_all", std::vector<float>(count * nn), {}};
    const std::vector<float> in = inputs(me, count * nn);
    c.all_to_all(comm::view(in), comm::view(k.result));
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < count; ++i) k.expected.push_back(input(r, static_cast<std::size_t>(me) * count + i));
    out.push_back(std::move(k));
  }
  return out;
}

// Combines every rank's per-collective hash (gathered over the communicator
// itself) into one checksum per collective and prints them on rank 0, with
// the ranks whose result differs from the independently computed one.
int report(comm::Communicator& c, const std::vector<Check>& checks, const std::string& transport) {
  const std::size_t nk = checks.size();
  std::vector<std::int64_t> mine;  // nk hashes, then nk "wrong" flags
  for (const Check& k : checks)
    mine.push_back(static_cast<std::int64_t>(fnv1a(k.result.data(), k.result.size() * sizeof(float))));
  for (const Check& k : checks)
    mine.push_back(std::memcmp(k.result.data(), k.expected.data(), k.result.size() * sizeof(float)) != 0);
  std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(c.size()));
  c.allgather(comm::view(mine), comm::view(all));
  if (c.rank() != 0) return 0;
  std::printf("swap_transports: transport=%s ranks=%d\n", transport.c_str(), c.size());
  bool all_right = true;
  std::uint64_t overall = 0xcbf29ce484222325ull;
  for (std::size_t k = 0; k < nk; ++k) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    std::string wrong;
    for (int r = 0; r < c.size(); ++r) {
      const std::size_t row = static_cast<std::size_t>(r) * mine.size();
      h = fnv1a(&all[row + k], sizeof(std::int64_t), h);
      if (all[row + nk + k] != 0) wrong += " " + std::to_string(r);
    }
    overall = fnv1a(&h, sizeof h, overall);
    all_right = all_right && wrong.empty();
    std::printf("%-15s checksum %016llx  %s\n", checks[k].name.c_str(), static_cast<unsigned long long>(h),
                wrong.empty() ? "verified" : ("WRONG on rank(s)" + wrong).c_str());
  }
  std::printf("all             checksum %016llx\n", static_cast<unsigned long long>(overall));
  std::printf("results match the independently computed values: %s\n", all_right ? "yes" : "NO");
  return all_right ? 0 : 1;
}

int run_rank(comm::Communicator& c, std::size_t count) {
  const std::vector<Check> checks = run_collectives(c, count);
  return report(c, checks, std::string(c.transport_name()));
}

// --threads N: N ranks as threads of this process over the `local` transport,
// meeting through an in-memory store instead of COMM_STORE. A rank that fails
// aborts the others, which would otherwise wait for it until the timeout.
int run_threads(const comm::Config& base, int nthreads, std::size_t count) {
  auto store = comm::make_memory_store();
  const auto n = static_cast<std::size_t>(nthreads);
  std::vector<int> codes(n, 0);
  std::vector<comm::Communicator> comms(n);
  std::vector<std::thread> threads;
  std::mutex mu;
  bool failed = false;
  for (int r = 0; r < nthreads; ++r)
    threads.emplace_back([&, r] {
      const auto ru = static_cast<std::size_t>(r);
      try {
        comm::Config cfg = base;
        cfg.rank = r;
        cfg.world_size = nthreads;
        cfg.local_rank = r;
        cfg.transport = "local";
        comm::Communicator c = comm::Communicator::create(cfg, store);
        {
          std::lock_guard lock(mu);
          if (failed) c.abort();
          comms[ru] = std::move(c);
        }
        codes[ru] = run_rank(comms[ru], count);
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        std::fprintf(stderr, "swap_transports: rank %d: %s\n", r, e.what());
        codes[ru] = 1;
        failed = true;
        for (auto& other : comms)
          if (other.valid()) other.abort();
      }
    });
  for (auto& t : threads) t.join();
  for (int code : codes)
    if (code != 0) return code;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t count = 1000;
  std::string transport;
  int threads = 0;
  comm::cli::Parser args("swap_transports", "swap_transports [options]");
  args.description("Runs allreduce, allgather, reduce_scatter, broadcast, all_to_all on deterministic inputs and\n"
                   "prints one checksum per collective: identical whichever transport runs them.");
  args.integer("--count", "N", "elements per rank and block (default 1000)", count, 1);
  args.text("--transport", "NAME", "overrides COMM_TRANSPORT", transport);
  args.integer("--threads", "N", "run N ranks as threads of this process over the local transport", threads, 0);
  args.parse_or_exit(argc, argv);
  try {
    comm::Config cfg = comm::Config::from_env();
    if (threads > 0) {
      if (!transport.empty() && transport != "local") args.fail("--threads runs the local transport only");
      return run_threads(cfg, threads, count);
    }
    if (!transport.empty()) cfg.transport = transport;
    comm::Communicator world = comm::Communicator::create(cfg);
    return run_rank(world, count);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "swap_transports: %s\n", e.what());
    return 1;
  }
}
