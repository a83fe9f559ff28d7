// comm-shm-repeat-timeout: a timeout on the repeat path of a blocking
// all-reduce (core/repeat_allreduce.cpp), which reads no clock before its
// first signal: its deadline runs from the first wait that finds a flag
// missing. Every rank all-reduces 2 floats 50 times (after the first, each
// call takes the repeat path) and checks the sums; then the last rank stops
// calling collectives while the others enter call 51 with a 1 s timeout.
// Each of them must fail with ErrorCode::timeout naming the last rank, after
// at least the timeout and well before the communicator's own 60 s.
//
//   comm-shm-repeat-timeout      (2 or more ranks under commrun, COMM_TRANSPORT=shm)
// The flight record must hold all 51 calls, the last entries of the
// recorder: calls 0-49 done (whether a call recorded itself before it waited
// or, never having had to wait, after it finished), call 50 posted while it
// waits for the rank that never comes (read from another thread), then failed.
// Exit status: 0 as expected, 1 otherwise.

#include <comm/comm.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

std::vector<std::string> entries_of(const std::string& json) {
  std::vector<std::string> entries;
  for (std::size_t at = json.find("{\"id\":"); at != std::string::npos; at = json.find("{\"id\":", at + 1))
    entries.push_back(json.substr(at, json.find('}', at) - at));
  return entries;
}

std::string call_of(int k) { return "\"seq\":" + std::to_string(k) + ",\"collective\":\"allreduce\",\"bytes\":8,"; }

bool recorded(const std::string& json, int rank) {
  const std::vector<std::string> entries = entries_of(json);
  constexpr int kCalls = 51;
  if (entries.size() < kCalls) {
    std::printf("FAIL: rank %d's flight record holds %zu operations, fewer than its %d calls\n", rank, entries.size(),
                kCalls);
    return false;
  }
  for (int k = 0; k < kCalls; ++k) {
    const std::string& e = entries[entries.size() - kCalls + static_cast<std::size_t>(k)];
    const std::string state = k + 1 < kCalls ? "\"state\":\"done\"" : "\"state\":\"failed\"";
    const std::string call = call_of(k);
    if (e.find(call) == std::string::npos || e.find(state) == std::string::npos) {
      std::printf("FAIL: rank %d's flight record of call %d is not %s with %s: %s\n", rank, k, call.c_str(),
                  state.c_str(), e.c_str());
      return false;
    }
  }
  std::printf("ok: rank %d's flight record holds its %d calls, the last failed\n", rank, kCalls);
  return true;
}

}  // namespace

int main() {
  comm::Config cfg = comm::Config::from_env();
  cfg.timeout = std::chrono::seconds(60);
  comm::Communicator c = comm::Communicator::create(cfg);
  const int n = c.size(), last = n - 1;
  for (int k = 0; k < 50; ++k) {
    std::vector<float> v{static_cast<float>(c.rank() + k), 1.0f};
    c.allreduce(comm::view(v), comm::ReduceOp::sum);
    const float expect = static_cast<float>(n * (n - 1) / 2 + n * k);
    if (v[0] != expect || v[1] != static_cast<float>(n)) {
      std::printf("FAIL: rank %d call %d: got %g %g, expected %g %g\n", c.rank(), k, v[0], v[1], expect, double(n));
      return 1;
    }
  }
  if (c.rank() == last) {
    std::this_thread::sleep_for(std::chrono::seconds(3));  // the others time out meanwhile
    std::printf("ok: rank %d stayed away\n", c.rank());
    return 0;
  }
  std::vector<float> v{1.0f, 1.0f};
  comm::CallOptions opts;
  opts.timeout = std::chrono::seconds(1);
  const auto t0 = std::chrono::steady_clock::now();
  // Half-way through the wait, call 50 must already be in the record, posted.
  std::string while_waiting;
  std::thread look([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    while_waiting = c.flight_recorder_json();
  });
  struct Joiner {
    std::thread& t;
    ~Joiner() {
      if (t.joinable()) t.join();
    }
  } joiner{look};
  try {
    c.allreduce(comm::view(v), comm::ReduceOp::sum, opts);
    std::printf("FAIL: rank %d completed an all-reduce its peer never entered\n", c.rank());
    return 1;
  } catch (const comm::Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string what = e.what();
    const bool named = what.find("waiting for rank " + std::to_string(last) + ", which has not arrived") != std::string::npos;
    const bool ok = e.code() == comm::ErrorCode::timeout && named && s >= 0.9 && s < 10;
    std::printf("%s: rank %d failed after %.2f s (%s): %s\n", ok ? "ok" : "FAIL", c.rank(), s,
                comm::to_string(e.code()).data(), e.what());
    look.join();
    const std::vector<std::string> then = entries_of(while_waiting);
    const bool posted = !then.empty() && then.back().find(call_of(50)) != std::string::npos &&
                        then.back().find("\"state\":\"posted\"") != std::string::npos;
    if (!posted) std::printf("FAIL: rank %d's flight record held no posted call 50 while it waited\n", c.rank());
    return ok && posted && recorded(c.flight_recorder_json(), c.rank()) ? 0 : 1;
  }
}
