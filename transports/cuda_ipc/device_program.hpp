#pragma once
// A direct-memory program (comm/direct.hpp) lowered for the CUDA executor:
// the same copy/reduce/signal/wait operations as the CPU executor runs, as
// plain structs a kernel can read, plus the grid barriers the device needs
// and the host does not. On the host one thread runs a rank's program, so an
// operation sees everything the previous ones wrote; on the device every
// block runs every operation on its own share of the elements, so an
// operation that touches bytes an earlier one wrote (or overwrites bytes an
// earlier one read) must first wait for all blocks: lower() puts a barrier
// there, and before every signal (a flag may only rise once all blocks'
// stores are done). Waits need none: every block polls the flags itself.
//
// Pure C++ (no CUDA headers): compiled by the host compiler and by nvcc,
// tested on machines without a GPU.

#include <comm/direct.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace comm::cuda_ipc {

enum class DeviceOpKind : std::uint8_t {
  copy,     // DirectOpKind::copy
  reduce,   // DirectOpKind::reduce
  signal,   // a barrier of the whole grid, then this rank's flag := direct_flag(seq, step), release, system scope
  wait,     // every block: until `rank`'s flag >= direct_flag(seq, step), acquire, system scope
  barrier,  // every block of the grid has finished the operations before
};

struct DeviceRef {
  DirectSpace space = DirectSpace::input;
  std::int32_t rank = -1;
  std::uint64_t offset = 0;
};

struct DeviceOp {
  DeviceOpKind kind = DeviceOpKind::copy;
  std::uint8_t has_dst2 = 0;
  std::int32_t rank = -1;
  std::uint32_t step = 0;
  std::uint32_t first_src = 0;
  std::uint32_t num_srcs = 0;
  std::uint64_t bytes = 0;
  DeviceRef dst;
  DeviceRef dst2;
};

struct DeviceProgram {
  std::vector<DeviceOp> ops;
  std::vector<DeviceRef> srcs;
  std::uint32_t steps = 0;
  bool synced = false;
  std::size_t barriers = 0;      // barrier operations inserted (signals excluded)
  std::size_t largest_op = 0;    // bytes of the largest copy/reduce (sizes the grid)
};

// Lowers one rank's program; pure, deterministic.
DeviceProgram lower(const DirectProgram& program);

}  // namespace comm::cuda_ipc
