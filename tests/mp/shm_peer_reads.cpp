// comm-shm-peer-reads: the all-reduces that read the peers' own buffers
// (mem_peer_twoshot, mem_peer_oneshot: cross-memory reads on transport shm),
// in real processes, each against its window-staged twin (mem_twoshot, mem_oneshot).
//
//   comm-shm-peer-reads          (COMM_TRANSPORT=shm, cross-memory reads permitted)
//     - it is offered and eligible at 32 KiB;
//     - its results are bitwise those of its twin and of a rank-order fold
//       computed here, for f32 and f64 sums of values whose sums round, and
//       for every dtype against mem_twoshot; out of place and in place; counts
//       0, 1, odd, not divisible by the ranks, and several scratch chunks;
//     - 200 back-to-back calls on the same buffers, alternating in place and
//       out of place, each refilled right after the previous returned, all right.
//   comm-shm-peer-reads --off    (COMM_SHM_CMA=0)
//     - it is listed but not eligible (no prediction at any size), automatic
//       selection never picks it, and forcing it per call fails with
//       `unsupported` naming COMM_SHM_CMA=0 on every rank;
//   COMM_ALGO=allreduce=mem_peer_twoshot comm-shm-peer-reads --off   likewise, forced by COMM_ALGO.
// Exit status: 0 pass, 1 fail, 77 shm is not available in this build.

#include "mp_test_util.hpp"

#include <comm/comm.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace {

// The algorithms that read peers' buffers, and the one whose bits each must match.
struct Pair {
  const char* algo;
  const char* like;
};
constexpr Pair kPeerAlgos[] = {{"mem_peer_twoshot", "mem_twoshot"}, {"mem_peer_oneshot", "mem_oneshot"}};
int failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  if (failures <= 30) std::printf("FAIL %s\n", what.c_str());
}

// Values whose sums round in f32 and f64, distinct per rank, element and round.
double value(int rank, std::size_t i, int round) {
  const auto k = static_cast<double>((i * 2654435761u + static_cast<std::size_t>(rank) * 40503u +
                                      static_cast<std::size_t>(round) * 9973u) % 100003u);
  return (k / 7.0 + 0.1) * (rank % 2 ? -1.0 : 1.0) * (1.0 + rank / 3.0);
}

template <class T>
std::vector<T> inputs(int rank, std::size_t count, int round) {
  std::vector<T> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<T>(value(rank, i, round));
  return v;
}

// The rank-order fold ((x0 + x1) + x2) + ... in T, computed here.
template <class T>
std::vector<T> fold(int n, std::size_t count, int round) {
  std::vector<T> acc = inputs<T>(0, count, round);
  for (int r = 1; r < n; ++r) {
    const std::vector<T> x = inputs<T>(r, count, round);
    for (std::size_t i = 0; i < count; ++i) acc[i] = acc[i] + x[i];
  }
  return acc;
}

// Raw bytes of an all-reduce of `bytes` (count elements of t) by `algo`.
std::vector<unsigned char> run(comm::Communicator& c, const std::string& algo, comm::DataType t, std::size_t count,
                               comm::ReduceOp op, bool in_place, int round) {
  const std::size_t es = comm::dtype_size(t);
  std::vector<double> src = inputs<double>(c.rank(), count, round);
  std::vector<unsigned char> in(count * es), out(count * es, 0xcd);
  // Any dtype: the bytes of a double's value converted through the library's own f64 -> t reduction would
  // be circular, so non-float dtypes get integer bytes and the float ones exact casts below.
  for (std::size_t i = 0; i < count; ++i) {
    if (t == comm::DataType::f32) {
      const float f = static_cast<float>(src[i]);
      std::memcpy(&in[i * es], &f, es);
    } else if (t == comm::DataType::f64) {
      std::memcpy(&in[i * es], &src[i], es);
    } else {
      for (std::size_t b = 0; b < es; ++b) in[i * es + b] = static_cast<unsigned char>((i * 31 + b * 7 + c.rank()) & 0x3f);
    }
  }
  comm::CallOptions o;
  o.algorithm = algo;
  if (in_place) {
    c.allreduce(comm::View{in.data(), count, t}, op, o);
    return in;
  }
  c.allreduce(comm::ConstView{in.data(), count, t}, comm::View{out.data(), count, t}, op, o);
  return out;
}

template <class T>
void check_fold(comm::Communicator& c, const char* algo, comm::DataType t, std::size_t count, bool in_place) {
  std::vector<unsigned char> got;
  try {
    got = run(c, algo, t, count, comm::ReduceOp::sum, in_place, 0);
  } catch (const comm::Error& e) {
    // mem_peer_oneshot holds every peer's input in one window: larger calls are refused alike on every rank.
    if (e.code() == comm::ErrorCode::unsupported && std::string(e.what()).find("does not fit") != std::string::npos)
      return;
    throw;
  }
  const std::vector<T> want = fold<T>(c.size(), count, 0);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) wrong += std::memcmp(&got[i * sizeof(T)], &want[i], sizeof(T)) != 0;
  expect(wrong == 0, std::string(algo) + " " + std::string(comm::to_string(t)) + " sum of " + std::to_string(count) +
                         (in_place ? " in place" : "") + ": " + std::to_string(wrong) +
                         " elements differ from the rank-order fold");
}

void check_on(comm::Communicator& c, const char* algo, const char* like) {
  const int n = c.size();
  const std::vector<std::string> algos = c.algorithms(comm::Collective::allreduce);
  expect(std::find(algos.begin(), algos.end(), algo) != algos.end(), std::string(algo) + " is not offered");
  bool eligible = false;
  for (const auto& cand : c.candidates(comm::Collective::allreduce, 32 << 10))
    eligible = eligible || (cand.algorithm == algo && cand.predicted_us > 0);
  expect(eligible, std::string(algo) + " has no prediction at 32 KiB (not eligible)");
  // 300007 f32 per rank: several 256 KiB scratch chunks on 2 ranks.
  const std::size_t nn = static_cast<std::size_t>(n);
  const std::vector<std::size_t> counts{0, 1, 7, nn + 1, 1003, 8195, 300007};
  for (std::size_t count : counts)
    for (bool in_place : {false, true}) {
      check_fold<float>(c, algo, comm::DataType::f32, count, in_place);
      check_fold<double>(c, algo, comm::DataType::f64, count, in_place);
    }
  for (comm::DataType t : comm::kAllDataTypes)
    for (comm::ReduceOp op : comm::kAllReduceOps)
      for (std::size_t count : {std::size_t{1003}, std::size_t{70001}})
        for (bool in_place : {false, true}) {
          std::vector<unsigned char> a, b;
          try {
            a = run(c, algo, t, count, op, in_place, 1);
          } catch (const comm::Error& e) {
            if (e.code() != comm::ErrorCode::unsupported) throw;  // a dtype/op pair no algorithm runs
            continue;
          }
          b = run(c, like, t, count, op, in_place, 1);
          expect(a == b, std::string(algo) + " " + std::string(comm::to_string(t)) + " " +
                             std::string(comm::to_string(op)) + " of " + std::to_string(count) +
                             (in_place ? " in place" : "") + " is not bitwise " + like + "'s");
        }
  // The same buffers call after call, refilled as soon as the call returns: a
  // peer still reading them would see the next round's values.
  std::vector<float> buf(40000), out(40000);
  for (int round = 0; round < 200; ++round) {
    const bool in_place = round % 2 == 1;
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(value(c.rank(), i, round));
    comm::CallOptions o;
    o.algorithm = algo;
    if (in_place) c.allreduce(comm::view(buf), comm::ReduceOp::sum, o);
    else c.allreduce(comm::view(std::as_const(buf)), comm::view(out), comm::ReduceOp::sum, o);
    const std::vector<float> want = fold<float>(n, buf.size(), round);
    const std::vector<float>& got = in_place ? buf : out;
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) wrong += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
    expect(wrong == 0, std::string(algo) + " round " + std::to_string(round) + ": " + std::to_string(wrong) +
                           " elements wrong");
  }
}

void expect_refused(const std::function<void()>& fn, const char* algo, const std::string& what) {
  try {
    fn();
    expect(false, what + ": ran, although cross-memory reads are off");
  } catch (const comm::Error& e) {
    const std::string m = e.what();
    expect(e.code() == comm::ErrorCode::unsupported && m.find(algo) != std::string::npos &&
               m.find("COMM_SHM_CMA=0") != std::string::npos,
           what + ": expected `unsupported` naming " + algo + " and COMM_SHM_CMA=0, got " +
               std::string(comm::to_string(e.code())) + ": " + m);
  }
}

void check_off(comm::Communicator& c, const char* algo) {
  for (std::size_t bytes : {std::size_t{8}, std::size_t{32} << 10, std::size_t{1} << 20}) {
    for (const auto& cand : c.candidates(comm::Collective::allreduce, bytes))
      expect(cand.algorithm != algo || cand.predicted_us < 0,
             std::string(algo) + " is eligible at " + std::to_string(bytes) + " B with cross-memory reads off");
    expect(c.algorithm_for(comm::Collective::allreduce, bytes) != algo, "automatic selection picks " +
                                                                              std::string(algo));
  }
  std::vector<float> buf(8192, 1.0f);
  comm::CallOptions o;
  o.algorithm = algo;
  expect_refused([&] { c.allreduce(comm::view(buf), comm::ReduceOp::sum, o); }, algo, "forced per call");
}

// COMM_ALGO=allreduce=mem_peer_twoshot with cross-memory reads off: creating
// the communicator or its first all-reduce is refused, saying why.
int check_forced_by_env() {
  std::vector<float> buf(8192, 1.0f);
  expect_refused(
      [&] {
        comm::Communicator forced = comm::Communicator::create(comm::Config::from_env());
        forced.allreduce(comm::view(buf), comm::ReduceOp::sum);
      },
      "mem_peer_twoshot", "forced by COMM_ALGO");
  if (failures == 0) std::printf("comm-shm-peer-reads: refused as expected\n");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const bool off = argc > 1 && std::strcmp(argv[1], "--off") == 0;
  mptest::require_transport("shm");
  if (off && std::getenv("COMM_ALGO")) return check_forced_by_env();
  ::unsetenv("COMM_ALGO");
  comm::Communicator c = mptest::create_or_exit(comm::Config::from_env());
  try {
    for (const Pair& p : kPeerAlgos) {
      if (off) check_off(c, p.algo);
      else check_on(c, p.algo, p.like);
    }
  } catch (const comm::Error& e) {
    std::printf("FAIL rank %d: %s\n", c.rank(), e.what());
    return 1;
  }
  // Every rank's verdict, so that every rank fails alike.
  std::vector<int> mine{failures}, all(static_cast<std::size_t>(c.size()));
  c.allgather(comm::view(std::as_const(mine)), comm::view(all));
  const int bad = std::accumulate(all.begin(), all.end(), 0);
  if (bad == 0) std::printf("comm-shm-peer-reads: rank %d: all passed\n", c.rank());
  return bad == 0 ? 0 : 1;
}
