#pragma once
// Runs one rank's direct-memory program on the calling thread over host
// windows (DirectMemory with MemoryKind::host): copies with memcpy,
// reductions with the engine's kernels in the program's source order, signals
// and waits through DirectMemory. Blocks until the program is done; throws
// what DirectMemory::wait throws (peer died, timeout naming who is behind,
// aborted).

#include <comm/direct.hpp>
#include <comm/transport.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace comm::direct {

struct HostCall {
  const std::byte* input = nullptr;
  std::byte* output = nullptr;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  std::uint64_t seq = 1;  // direct-memory call number, from 1
  std::chrono::steady_clock::time_point deadline{};
};

void run_on_host(const DirectProgram& program, DirectMemory& memory, const HostCall& call);

// dst = srcs[0] (op) srcs[1] (op) ... elementwise, in order; dst (and dst2) may
// coincide exactly with any source. `bytes` is a multiple of the element size.
void reduce_in_order(std::byte* dst, std::byte* dst2, const std::byte* const* srcs, std::size_t nsrcs,
                     std::size_t bytes, DataType dtype, ReduceOp op);

}  // namespace comm::direct
