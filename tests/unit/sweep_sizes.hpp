#pragma once
// World sizes the unit sweeps walk. Under COMM_TEST_QUICK_SWEEP=1
// (tools/sanitize.sh, where every thread runs 5-15x slower) one and two
// ranks, odd and even, powers of two and not: the paths the full list takes.
// The plain build runs the full list.

#include <cstdlib>
#include <vector>

namespace comm::test {

inline bool quick_sweep() { return std::getenv("COMM_TEST_QUICK_SWEEP") != nullptr; }

inline const std::vector<int>& sweep_world_sizes() {
  static const std::vector<int> sizes = quick_sweep() ? std::vector<int>{1, 2, 3, 4, 7, 8}
                                                      : std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16};
  return sizes;
}

}  // namespace comm::test
