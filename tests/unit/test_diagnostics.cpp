// Never hang silently: the consistency check names both mismatching calls on
// every rank, flight-recorder dumps, and teardown that leaks no descriptors.

#include "local_group.hpp"
#include "diag/flight_recorder.hpp"

#include <comm/comm.hpp>
#include <doctest/doctest.h>

#include <dirent.h>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using namespace comm;
using comm::test::run_local;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Runs `call` on 2 checked ranks where rank 1 calls differently; returns each rank's error text.
std::vector<std::string> mismatch(const std::function<void(Communicator&)>& call) {
  Config cfg;
  cfg.check = true;
  std::vector<std::string> errors(2);
  run_local(2, cfg, [&](Communicator& c) {
    try {
      call(c);
      errors[static_cast<std::size_t>(c.rank())] = "no error";
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::mismatch);
      errors[static_cast<std::size_t>(c.rank())] = e.what();
    }
    CHECK(c.failed());
  });
  return errors;
}

int count_entries(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

}  // namespace

TEST_CASE("consistency check passes matching calls") {
  Config cfg;
  cfg.check = true;
  run_local(3, cfg, [](Communicator& c) {
    std::vector<float> v(10, 1.0f);
    c.allreduce(view(v), ReduceOp::sum);
    c.broadcast(view(v), 2);
    CHECK(v == std::vector<float>(10, 3.0f));
    c.barrier();
  });
}

TEST_CASE("consistency check: each field of a mismatch is named on every rank") {
  SUBCASE("count") {
    auto errs = mismatch([](Communicator& c) {
      std::vector<float> v(c.rank() == 0 ? 8192 : 4096);
      c.allreduce(view(v), ReduceOp::sum);
    });
    for (auto& e : errs) {
      CHECK(contains(e, "allreduce #0"));
      CHECK(contains(e, "rank 1 called allreduce(count=4096, f32, sum"));
      CHECK(contains(e, "rank 0 called allreduce(count=8192, f32, sum"));
    }
  }
  SUBCASE("collective") {
    auto errs = mismatch([](Communicator& c) {
      std::vector<float> v(4);
      if (c.rank() == 0)
        c.allreduce(view(v), ReduceOp::sum);
      else
        c.broadcast(view(v), 0);
    });
    for (auto& e : errs) CHECK(contains(e, "rank 1 called broadcast("));
  }
  SUBCASE("dtype") {
    auto errs = mismatch([](Communicator& c) {
      std::vector<float> f(4);
      std::vector<std::int32_t> i(4);
      if (c.rank() == 0)
        c.allreduce(view(f), ReduceOp::sum);
      else
        c.allreduce(view(i), ReduceOp::sum);
    });
    for (auto& e : errs) CHECK(contains(e, "count=4, i32, sum"));
  }
  SUBCASE("op") {
    auto errs = mismatch([](Communicator& c) {
      std::vector<float> v(4);
      c.allreduce(view(v), c.rank() == 0 ? ReduceOp::sum : ReduceOp::max);
    });
    for (auto& e : errs) CHECK(contains(e, "f32, max"));
  }
  SUBCASE("root") {
    auto errs = mismatch([](Communicator& c) {
      std::vector<float> v(4);
      c.broadcast(view(v), c.rank());
    });
    for (auto& e : errs) CHECK(contains(e, "root=1"));
  }
  SUBCASE("algorithm") {
    auto errs = mismatch([](Communicator& c) {
      std::vector<float> v(4);
      CallOptions o;
      o.algorithm = c.rank() == 0 ? "ring" : "direct";
      c.allreduce(view(v), ReduceOp::sum, o);
    });
    for (auto& e : errs) CHECK(contains(e, "direct)"));
  }
}

TEST_CASE("flight recorder lists operations with their states") {
  run_local(2, [](Communicator& c) {
    std::vector<float> v(4, 1.0f);
    c.allreduce(view(v), ReduceOp::sum);
    c.barrier();
    const std::string json = c.flight_recorder_json();
    CHECK(contains(json, "\"rank\":" + std::to_string(c.rank())));
    CHECK(contains(json, "\"collective\":\"allreduce\""));
    CHECK(contains(json, "\"collective\":\"barrier\""));
    CHECK(contains(json, "\"state\":\"done\""));
  });
}

TEST_CASE("a failure writes the flight recorder to COMM_DUMP_DIR") {
  const auto dir = std::filesystem::temp_directory_path() / ("comm-dump-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Config cfg;
  cfg.dump_dir = dir.string();
  cfg.timeout = std::chrono::milliseconds(200);
  CHECK_THROWS_AS(run_local(2, cfg,
                            [](Communicator& c) {
                              std::vector<float> v(4);
                              if (c.rank() == 0) c.recv(view(v), 1);  // rank 1 never sends
                            }),
                  Error);
  int dumps = 0;
  for (auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    std::stringstream ss;
    ss << in.rdbuf();
    CHECK(contains(ss.str(), "\"reason\":\"timeout\""));
    CHECK(contains(ss.str(), "\"state\":\"failed\""));
    ++dumps;
  }
  CHECK(dumps == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("creating and destroying 200 communicators leaks no descriptors or threads") {
  auto once = [] {
    run_local(2, [](Communicator& c) {
      std::vector<float> v(3, 1.0f);
      c.allreduce(view(v), ReduceOp::sum);
    });
  };
  once();  // process-wide one-time state (signal watcher) comes up here
  const int fds = count_entries("/proc/self/fd");
  const int threads = count_entries("/proc/self/task");
  for (int i = 0; i < 200; ++i) once();
  // A call that waited past the stall threshold (a loaded machine) started a
  // detached probe thread, which ends within its poll period once told to
  // stop: a leak is what is still there after that.
  const auto settled = [](const char* dir, int expected) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (count_entries(dir) != expected && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return count_entries(dir);
  };
  CHECK(settled("/proc/self/fd", fds) == fds);
  CHECK(settled("/proc/self/task", threads) == threads);
}

TEST_CASE("flight recorder: a finished operation reads as done before and after its entry is settled") {
  using comm::detail::FlightRecord;
  using comm::detail::FlightRecorder;
  using comm::detail::OpState;
  FlightRecorder recorder(8);
  const auto state_of = [&](std::uint64_t id) {
    for (const FlightRecord& r : recorder.snapshot())
      if (r.id == id) return std::make_tuple(r.state, r.steps_done, r.steps_total, r.end_us);
    FAIL("operation " << id << " is not in the recorder");
    return std::make_tuple(OpState::failed, std::size_t{0}, std::size_t{0}, 0.0);
  };
  recorder.post(0, 1, Collective::allreduce, "mem_oneshot", 8, DataType::f32, ReduceOp::sum, -1, 10.0);
  CHECK(state_of(0) == std::make_tuple(OpState::posted, std::size_t{0}, std::size_t{0}, -1.0));
  recorder.finish(0, 12.5);  // not settled: the reader applies it
  CHECK(state_of(0) == std::make_tuple(OpState::done, std::size_t{1}, std::size_t{1}, 12.5));
  recorder.post(1, 2, Collective::allreduce, "mem_oneshot", 8, DataType::f32, ReduceOp::sum, -1, 13.0);
  recorder.finish(1, 14.0);  // 0's entry was settled by the post; 1 is the one pending now
  CHECK(state_of(0) == std::make_tuple(OpState::done, std::size_t{1}, std::size_t{1}, 12.5));
  CHECK(state_of(1) == std::make_tuple(OpState::done, std::size_t{1}, std::size_t{1}, 14.0));
  recorder.update(1, OpState::failed, 0, 1, "later");  // an update settles first, then applies
  CHECK(std::get<0>(state_of(1)) == OpState::failed);
}

TEST_CASE("flight recorder: a dump racing the writer never reads a torn entry") {
  // The writer derives every field from the operation's id, so a reader can
  // check that each entry it returns is one operation's, at one moment.
  using comm::detail::FlightRecord;
  using comm::detail::FlightRecorder;
  using comm::detail::OpState;
  FlightRecorder recorder(64);
  const std::string names[] = {"ring", "mem_oneshot", "recursive_doubling"};
  const auto message = [](std::uint64_t id) { return "operation " + std::to_string(id) + " failed"; };
  // The writer goes on past kOps until the reader has dumped kDumps times, so
  // the race is exercised however the two threads are scheduled.
  constexpr std::uint64_t kOps = 100000;
  constexpr std::size_t kDumps = 20;
  std::atomic<bool> done{false};
  std::atomic<std::size_t> dumps{0};
  std::uint64_t written = 0;
  std::thread writer([&] {
    for (std::uint64_t id = 0; id < kOps || dumps.load() < kDumps; ++id) {
      recorder.post(id, 3 * id, Collective::allreduce, names[id % 3], 7 * id, DataType::f32, ReduceOp::sum,
                    static_cast<int>(id % 5), static_cast<double>(id));
      if (id % 100 == 0)
        recorder.update(id, OpState::failed, 0, 1, message(id));
      else if (id % 7 == 3)
        recorder.finish(id, static_cast<double>(id) + 0.5);
      else
        recorder.update(id, OpState::done, id % 4, 3 + id % 4);
      written = id + 1;
    }
    done = true;
  });
  std::size_t entries = 0, failed = 0;
  std::string wrong;
  while (!done && wrong.empty()) {
    for (const FlightRecord& r : recorder.snapshot()) {
      ++entries;
      const std::uint64_t id = r.id;
      bool ok = r.seq == 3 * id && r.bytes == 7 * id && r.algorithm == names[id % 3] &&
                r.root == static_cast<int>(id % 5) && r.start_us == static_cast<double>(id);
      switch (r.state) {
        case OpState::posted: ok = ok && r.steps_done == 0 && r.end_us == -1 && r.error.empty(); break;
        case OpState::done:
          ok = ok && id % 100 != 0 && r.error.empty() &&
               (id % 7 == 3 ? r.steps_done == 1 && r.steps_total == 1 && r.end_us == static_cast<double>(id) + 0.5
                            : r.steps_done == id % 4 && r.steps_total == 3 + id % 4);
          break;
        case OpState::failed:
          ok = ok && id % 100 == 0 && r.error == message(id);
          failed += ok;
          break;
      }
      if (!ok) {
        wrong = "id " + std::to_string(id) + " seq " + std::to_string(r.seq) + " bytes " + std::to_string(r.bytes) +
                " algorithm " + std::string(r.algorithm) + " steps " + std::to_string(r.steps_done) + "/" +
                std::to_string(r.steps_total) + " error '" + r.error + "'";
        break;
      }
    }
    ++dumps;
  }
  // A torn entry stops the reader early; the writer must not wait for it then.
  if (!wrong.empty()) dumps = kDumps;
  writer.join();
  CHECK_MESSAGE(wrong.empty(), "a torn entry: " << wrong);
  INFO(dumps.load() << " dumps, " << entries << " entries, " << failed << " failed ones");
  // After the writer: the last 64 operations, in order, all finished.
  const std::vector<FlightRecord> last = recorder.snapshot();
  REQUIRE(last.size() == 64);
  for (std::size_t k = 0; k < last.size(); ++k) CHECK(last[k].id == written - 64 + k);
  CHECK(last.back().state == OpState::done);
}
