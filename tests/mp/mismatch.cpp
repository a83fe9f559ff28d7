// comm-mp-mismatch: mismatched collectives across real processes, with
// COMM_CHECK off (the default). Rank 0 all-reduces f32, rank 1 the same
// number of bytes as i32 (then: sum against max; allreduce against
// broadcast; "op-repeated": sum against max after five matching sums, so
// that rank 0 takes the repeat path of a blocking all-reduce). Each rank must fail with ErrorCode::mismatch naming both calls
// well before the 30 s timeout, and its buffer must be untouched: no rank
// may take another call's bytes.
//
//   comm-mp-mismatch dtype|op|op-repeated|collective      (2 ranks under commrun)
// Exit status: 0 as expected, 1 otherwise, 77 the transport is not available.

#include <comm/comm.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

int report(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string kind = argc > 1 ? argv[1] : "dtype";
  comm::Config cfg = comm::Config::from_env();
  cfg.timeout = std::chrono::seconds(30);
  std::optional<comm::Communicator> c;
  try {
    c.emplace(comm::Communicator::create(cfg));
  } catch (const comm::Error& e) {
    std::fprintf(stderr, "skip: %s\n", e.what());
    return e.code() == comm::ErrorCode::unknown_transport ? 77 : 1;
  }
  const int rank = c->rank();
  std::vector<float> f(64, 2.0f);
  std::vector<std::int32_t> i(64, 2);
  std::string mine, theirs;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    comm::CallOptions direct;
    direct.algorithm = "direct";
    if (kind == "dtype") {
      mine = rank == 0 ? "f32" : "i32";
      theirs = rank == 0 ? "i32" : "f32";
      if (rank == 0)
        c->allreduce(comm::view(f), comm::ReduceOp::sum, direct);
      else
        c->allreduce(comm::view(i), comm::ReduceOp::sum, direct);
    } else if (kind == "op" || kind == "op-repeated") {
      for (int k = 0; kind == "op-repeated" && k < 5; ++k) {
        std::fill(f.begin(), f.end(), 2.0f);
        c->allreduce(comm::view(f), comm::ReduceOp::sum);
        if (f != std::vector<float>(64, 2.0f * static_cast<float>(c->size())))
          return report(false, "rank " + std::to_string(rank) + ": matching all-reduce " + std::to_string(k) +
                                   " gave " + std::to_string(f[0]));
      }
      std::fill(f.begin(), f.end(), 2.0f);
      mine = rank == 0 ? "sum" : "max";
      theirs = rank == 0 ? "max" : "sum";
      c->allreduce(comm::view(f), rank == 0 ? comm::ReduceOp::sum : comm::ReduceOp::max);
    } else {
      mine = rank == 0 ? "allreduce" : "broadcast";
      theirs = rank == 0 ? "broadcast" : "allreduce";
      if (rank == 0)
        c->allreduce(comm::view(f), comm::ReduceOp::sum);
      else
        c->broadcast(comm::view(f), 0);
    }
    return report(false, "rank " + std::to_string(rank) + ": the mismatched call completed");
  } catch (const comm::Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string m = e.what();
    const bool untouched = f == std::vector<float>(64, 2.0f) && i == std::vector<std::int32_t>(64, 2);
    const bool ok = e.code() == comm::ErrorCode::mismatch && m.find(mine) != std::string::npos &&
                    m.find(theirs) != std::string::npos && s < 15 && untouched;
    char took[32];
    std::snprintf(took, sizeof took, "%.1f", s);
    return report(ok, "rank " + std::to_string(rank) + " after " + took + " s: " + m +
                          (untouched ? "" : " [BUFFER CHANGED]"));
  }
}
