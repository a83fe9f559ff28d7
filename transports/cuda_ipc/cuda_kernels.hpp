#pragma once
// Launchers of the CUDA-IPC kernels (cuda_kernels.cu). Every launcher only
// enqueues on `stream` and never synchronises the host, so all of them can be
// captured in a CUDA graph. They return the launch status.

#include "device_program.hpp"
#include "device_status.hpp"

#include <comm/types.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace comm::cuda_ipc {

// One flag store (release, system scope) of `value` at `flag`.
cudaError_t launch_signal(std::uint64_t* flag, std::uint64_t value, cudaStream_t stream);

inline constexpr std::size_t kMaxWaitsPerLaunch = 32;
struct FlagWaits {
  const std::uint64_t* flag[kMaxWaitsPerLaunch];
  std::uint64_t value[kMaxWaitsPerLaunch];
  std::int32_t rank[kMaxWaitsPerLaunch];
  std::uint32_t count = 0;
};
// One thread polls until every flag reached its value, `timeout_ns` passed or
// the abort word was set (then it records the failure in the control words).
cudaError_t launch_wait(const FlagWaits& waits, std::uint64_t timeout_ns, const DeviceControlRefs& control,
                        cudaStream_t stream);

// Per-communicator device state, in device memory, advanced by the program
// kernel itself so that a captured graph replays with fresh call numbers.
struct DeviceState {
  std::uint64_t seq = 0;          // direct-memory calls completed
  std::uint32_t last_synced = 1;  // the previous program synced this rank with everyone
};

struct ProgramLaunch {
  const DeviceOp* ops = nullptr;  // device memory
  std::uint32_t nops = 0;
  const DeviceRef* srcs = nullptr;  // device memory
  std::uint32_t synced = 0;       // DeviceProgram::synced
  const std::byte* input = nullptr;
  std::byte* output = nullptr;
  std::byte* const* bases = nullptr;  // device memory: every rank's slot 0, by rank
  std::uint64_t slot_bytes = 0;
  std::uint32_t slots = 2;
  std::int32_t rank = 0;
  std::int32_t nranks = 1;
  std::uint64_t call_word = 0;        // direct::call_word of this call
  DeviceState* state = nullptr;       // device memory
  DeviceControlRefs control;
  std::uint64_t timeout_ns = 0;
  std::uint64_t avg_elems = 0;        // avg: output elements to divide by nranks at the end; else 0
};

// Runs one rank's lowered program as one cooperative kernel of `blocks` blocks
// (every block co-resident: see blocks_for_program) on `stream`.
cudaError_t launch_program(const ProgramLaunch& p, DataType dtype, ReduceOp op, unsigned blocks,
                           cudaStream_t stream);
// Blocks for a program whose largest operation moves `bytes`: one for the
// smallest (a grid barrier costs more than it saves), up to one per multiprocessor.
unsigned blocks_for_program(std::size_t bytes, int multiprocessors);

}  // namespace comm::cuda_ipc
