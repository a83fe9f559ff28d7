#pragma once
// The words through which device code reports a failure to the host and the
// host asks device code to stop: they live in pinned host memory mapped into
// the device, so a kernel that gives up never needs the host to synchronise,
// and a host that aborts never needs a kernel launch. Shared by nvcc and the
// host compiler.

#include <cstdint>

namespace comm::cuda_ipc {

enum class DeviceFailure : std::uint32_t {
  none = 0,
  timeout,   // a flag wait passed its deadline; `rank` is the peer not heard from
  aborted,   // the host set DeviceControl::abort
  mismatch,  // `rank` is in another call: `value` is its call word, `expected` ours
};

// Which failure is reported is decided by an atomicCAS on a word in device
// memory (DeviceControlRefs::claim): system-scope atomics on host memory are
// not available over PCIe. The winner writes the details, then `failure` last.
struct DeviceStatus {
  std::uint32_t failure = 0;  // DeviceFailure
  std::int32_t rank = -1;
  std::uint64_t seq = 0;       // the direct-memory call that failed
  std::uint64_t value = 0;     // timeout: the flag seen; mismatch: the peer's call word
  std::uint64_t expected = 0;  // timeout: the flag awaited; mismatch: our call word
};

struct DeviceControl {
  DeviceStatus status;
  std::uint32_t abort = 0;  // set by the host; polled by every wait
};

// What device code is given: the mapped control words and the claim word.
struct DeviceControlRefs {
  DeviceControl* control = nullptr;  // mapped host memory (device address)
  std::uint32_t* claim = nullptr;    // device memory, 0 until a failure is claimed
};

}  // namespace comm::cuda_ipc
