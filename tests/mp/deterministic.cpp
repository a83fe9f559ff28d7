// comm-mp-deterministic: deterministic mode over a real transport. Every rank
// all-reduces the same order-sensitive inputs (tests/deterministic_values.hpp)
// at a count in every size bucket from 1 element to 1 MiB, with every
// algorithm that qualifies on this group and with automatic selection, in
// f32 and bf16, and compares each result bit for bit with the rank-ordered
// fold computed here. Equal to that reference on every transport means equal
// across transports. Also checks that naming a non-qualifying algorithm is a
// usage error that leaves the communicator working.
//
//   COMM_TRANSPORT=ucx commrun -n 3 comm-mp-deterministic
// Exit status: 0 pass, 1 fail.
#include "tests/deterministic_values.hpp"

#include <comm/comm.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: FAIL: %s\n", rank, what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

std::size_t first_difference(const void* a, const void* b, std::size_t count, std::size_t esize) {
  for (std::size_t i = 0; i < count; ++i)
    if (std::memcmp(static_cast<const char*>(a) + i * esize, static_cast<const char*>(b) + i * esize, esize) != 0)
      return i;
  return count;
}

}  // namespace

int main() {
  comm::Config cfg = comm::Config::from_env();
  cfg.deterministic = true;
  try {
    comm::Communicator c = comm::Communicator::create(cfg);
    const int n = c.size(), me = c.rank();
    std::vector<std::string> names{"auto"};
    for (const auto& cand : c.candidates(comm::Collective::allreduce, 64))
      if (cand.deterministic) names.push_back(cand.algorithm);
    int checked = 0;
    for (std::size_t count = 1; count <= (std::size_t{1} << 18); count = count * 4 + 1) {
      const auto want32 = comm::test::det_fold_f32(n, count);
      const auto want16 = comm::test::det_fold_bf16(n, count);
      std::vector<float> in32(count), out32(count);
      std::vector<std::uint16_t> in16(count), out16(count);
      for (std::size_t i = 0; i < count; ++i) {
        in32[i] = comm::test::det_value(me, i);
        in16[i] = comm::test::to_bf16(in32[i]);
      }
      for (const auto& name : names) {
        comm::CallOptions o;
        o.algorithm = name;
        c.allreduce(comm::view(in32), comm::view(out32), comm::ReduceOp::sum, o);
        if (std::size_t i = first_difference(out32.data(), want32.data(), count, 4); i < count)
          fail(me, name + " f32, " + std::to_string(count) + " elements: element " + std::to_string(i) + " is " +
                       std::to_string(out32[i]) + ", the rank-ordered sum is " + std::to_string(want32[i]));
        c.allreduce(comm::ConstView{in16.data(), count, comm::DataType::bf16},
                    comm::View{out16.data(), count, comm::DataType::bf16}, comm::ReduceOp::sum, o);
        if (std::size_t i = first_difference(out16.data(), want16.data(), count, 2); i < count)
          fail(me, name + " bf16, " + std::to_string(count) + " elements: element " + std::to_string(i) +
                       " differs from the rank-ordered sum");
        checked += 2;
      }
    }
    // A non-qualifying name is refused before anything is sent.
    for (const auto& a : c.algorithms(comm::Collective::allreduce)) {
      bool qualifies = false;
      for (const auto& q : names) qualifies = qualifies || q == a;
      if (qualifies) continue;
      comm::CallOptions o;
      o.algorithm = a;
      std::vector<float> x(4, 1.0f);
      try {
        c.allreduce(comm::view(x), comm::ReduceOp::sum, o);
        fail(me, "'" + a + "' ran in deterministic mode");
      } catch (const comm::Error& e) {
        if (!e.is_usage()) throw;
      }
    }
    std::vector<float> x(4, 1.0f);
    c.allreduce(comm::view(x), comm::ReduceOp::sum);
    if (x[0] != static_cast<float>(n)) fail(me, "the communicator no longer works after a refused algorithm");
    if (me == 0) {
      std::string list;
      for (const auto& q : names) list += " " + q;
      std::printf("deterministic on %s, %d ranks: %d all-reduces bitwise equal to the rank-ordered fold (%s)\n",
                  std::string(c.transport_name()).c_str(), n, checked, list.c_str() + 1);
    }
  } catch (const comm::Error& e) {
    fail(cfg.rank, std::string(comm::to_string(e.code())) + ": " + e.what());
  }
  return 0;
}
