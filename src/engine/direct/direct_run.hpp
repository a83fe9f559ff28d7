#pragma once
// What the direct-memory engine (direct_engine.hpp) is asked to run: one
// call's arguments (DirectRun) and a call's shape made ready to run
// (PreparedCall). Apart from the engine so that the communicator can keep a
// prepared call without seeing the engine's insides.

#include <comm/types.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace comm::direct {

struct DirectRun {
  std::uint64_t signature = 0;  // engine/tags.hpp call_signature
  const void* input = nullptr;
  void* output = nullptr;
  std::size_t count = 0;      // AlgoArgs::count convention
  std::size_t in_bytes = 0;   // whole input buffer
  std::size_t out_bytes = 0;  // whole output buffer
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  // See HostCall::deadline and timeout (engine/direct/cpu_executor.hpp).
  std::chrono::steady_clock::time_point deadline{};
  std::chrono::steady_clock::duration timeout{};
  // See HostCall::note (engine/direct/cpu_executor.hpp).
  void (*note)(void*) = nullptr;
  void* note_arg = nullptr;
};

struct DirectPlan;  // the engine's (direct_engine.hpp)

// A call's plan and what the engine derives from its algorithm, count, dtype,
// op and root, but not from its buffers, deadline or note, which
// DirectEngine::run takes from a DirectRun each time. The repeat path
// (core/repeat_allreduce.cpp) prepares an all-reduce once and runs it as long
// as calls repeat it, so decode's small all-reduce looks nothing up before its
// signal.
struct PreparedCall {
  const DirectPlan* plan = nullptr;
  std::uint64_t call_word = 0;  // see call_word() (engine/direct/cpu_executor.hpp)
  // The elements to divide by the ranks after the program (avg, where this
  // rank receives a reduction); 0 when none.
  std::size_t avg_count = 0;
};

}  // namespace comm::direct
