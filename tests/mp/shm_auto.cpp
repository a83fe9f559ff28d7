// comm-shm-auto: the default path of a one-host job reaches the direct-memory
// engine. With no COMM_TRANSPORT (unset here, whatever the caller's
// environment says) ranks in separate processes get transport `auto`; on one
// host its shared-memory transport's peer memory must be offered, so that
//  - the transport is `auto` and every link goes through its `shm`,
//  - automatic selection picks a direct-memory algorithm (mem_*) for an 8 B
//    all-reduce,
//  - those calls really run on the direct engine: they send no messages
//    (the byte counters do not move, while a ring all-reduce of the same
//    communicator moves them by what a ring sends), and
//  - results are right: f32 sum all-reduce, automatic and each mem_*
//    algorithm forced, out of place and in place, element counts 1, 2, odd,
//    not divisible by the ranks and large, against values each rank computes
//    itself.
//
//   comm-shm-auto            (under commrun, no --transport)
// Exit status: 0 pass, 1 fail, 77 shm is not available in this build.

#include "mp_test_util.hpp"

#include <comm/comm.hpp>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::printf("FAIL %s\n", what.c_str());
}

// Rank r's element i: small integers, so every partial sum is exact in f32.
float input(int rank, std::size_t i) { return static_cast<float>((rank * 7 + static_cast<int>(i % 17) * 13) % 17 - 8); }

float expected_sum(int n, std::size_t i) {
  float s = 0;
  for (int r = 0; r < n; ++r) s += input(r, i);
  return s;
}

std::uint64_t total(const std::vector<std::uint64_t>& v) { return std::accumulate(v.begin(), v.end(), std::uint64_t{0}); }

// One all-reduce of `count` elements with `algo` ("" = automatic), out of place or in place.
void check_allreduce(comm::Communicator& c, std::size_t count, const std::string& algo, bool inplace) {
  const int n = c.size();
  std::vector<float> in(count), out(count, -1000.0f);
  for (std::size_t i = 0; i < count; ++i) in[i] = input(c.rank(), i);
  comm::CallOptions o;
  if (!algo.empty()) o.algorithm = algo;
  if (inplace) {
    c.allreduce(comm::view(in), comm::ReduceOp::sum, o);
    out = in;
  } else {
    c.allreduce(comm::view(std::as_const(in)), comm::view(out), comm::ReduceOp::sum, o);
  }
  std::size_t wrong = 0, first = count;
  for (std::size_t i = 0; i < count; ++i)
    if (out[i] != expected_sum(n, i) && wrong++ == 0) first = i;
  expect(wrong == 0, "allreduce " + std::string(algo.empty() ? "auto" : algo) + " of " + std::to_string(count) +
                         " f32" + (inplace ? " in place" : "") + ": " + std::to_string(wrong) +
                         " wrong elements, first at " + std::to_string(first));
}

}  // namespace

int check(comm::Communicator& c);

int main() {
  ::unsetenv("COMM_TRANSPORT");
  ::unsetenv("COMM_ALGO");
  ::unsetenv("COMM_AUTO_INTRA");
  ::unsetenv("COMM_AUTO_INTER");
  mptest::require_transport("shm");
  const comm::Config cfg = comm::Config::from_env();
  comm::Communicator c = mptest::create_or_exit(cfg);
  try {
    return check(c);
  } catch (const comm::Error& e) {
    std::printf("FAIL rank %d: %s\n", c.rank(), e.what());
    return 1;
  }
}

int check(comm::Communicator& c) {
  const int n = c.size(), me = c.rank();
  expect(n >= 2, "needs at least 2 ranks, has " + std::to_string(n));
  expect(c.transport_name() == "auto", "transport is '" + std::string(c.transport_name()) + "', not auto");
  expect(c.peers().num_hosts() == 1, "ranks span " + std::to_string(c.peers().num_hosts()) + " hosts, not 1");
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    const std::string detail = c.link(me, p).detail;
    expect(detail.rfind("auto: shm", 0) == 0, "link " + std::to_string(me) + "-" + std::to_string(p) +
                                                  " does not go through auto's shm: " + detail);
  }
  const std::string small = c.algorithm_for(comm::Collective::allreduce, 8);
  expect(small.rfind("mem_", 0) == 0, "algorithm_for(allreduce, 8) is '" + small + "', not a direct-memory algorithm");

  // The direct engine moves no messages; a ring all-reduce of 1024 f32 sends
  // 2(n-1) blocks of 1024/n elements from every rank.
  const std::uint64_t before = total(c.bytes_sent());
  for (int k = 0; k < 50; ++k) check_allreduce(c, 2, "", k % 2 == 1);
  const std::uint64_t after_direct = total(c.bytes_sent());
  expect(after_direct == before, "50 automatic 8 B all-reduces sent " + std::to_string(after_direct - before) +
                                     " B through the transport: they did not run on the direct engine");
  check_allreduce(c, 1024, "ring", false);
  const std::uint64_t ring_bytes = total(c.bytes_sent()) - after_direct;
  const std::uint64_t ring_least = 2 * static_cast<std::uint64_t>(n - 1) * (1024 / static_cast<unsigned>(n)) * 4;
  expect(ring_bytes >= ring_least, "a ring all-reduce of 4 KiB sent " + std::to_string(ring_bytes) +
                                       " B, less than a ring's " + std::to_string(ring_least) +
                                       " B: the byte counters do not count");

  for (std::size_t count : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{1001}, std::size_t{262147},
                            std::size_t{1} << 20})
    for (bool inplace : {false, true}) check_allreduce(c, count, "", inplace);
  for (const char* algo : {"mem_oneshot", "mem_twoshot"})
    for (std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{1001}, std::size_t{16411}})
      for (bool inplace : {false, true}) check_allreduce(c, count, algo, inplace);

  // Every rank's verdict, so that every rank fails alike.
  std::vector<int> mine{failures}, all(static_cast<std::size_t>(n));
  c.allgather(comm::view(std::as_const(mine)), comm::view(all));
  const int bad = std::accumulate(all.begin(), all.end(), 0);
  std::printf("comm-shm-auto: rank %d of %d: transport %s, allreduce 8 B -> %s, %d failures here, %d in all\n", me, n,
              std::string(c.transport_name()).c_str(), small.c_str(), failures, bad);
  return bad ? 1 : 0;
}
