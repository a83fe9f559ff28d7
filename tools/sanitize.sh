#!/usr/bin/env bash
# Sanitizer jobs: an ASan+UBSan build running the unit and multi-process
# suites, and a TSan build running the threaded (local-transport) unit suite.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# Sanitized threads run 5-15x slower: the unit sweeps take fewer world sizes
# (tests/unit/sweep_sizes.hpp), and the multi-process suites on 6 and 8
# ranks (4 ranks per core here, the code paths of 3 and 4 ranks) stay in the
# plain build's ctest.
export COMM_TEST_QUICK_SWEEP=1
common=(-G Ninja -DCMAKE_BUILD_TYPE=Debug -DCOMM_BUILD_EXAMPLES=OFF -DCOMM_WITH_NCCL=OFF)

echo "sanitize: address,undefined"
cmake -S . -B build-asan "${common[@]}" -DCOMM_SANITIZE=address,undefined >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
LSAN_OPTIONS=suppressions=$PWD/tests/sanitizers/lsan.supp \
  ctest --test-dir build-asan --output-on-failure --no-tests=error -j"$jobs" -L "unit|mp|ucx|ofi|gloo" \
    -E "_suite(_[a-z]+)?_[68]$"

echo "sanitize: thread"
# The schedule sweeps ('schedules: ...') interpret every algorithm on one
# thread: nothing for TSan to see, and 5-10x its time; ASan runs them.
cmake -S . -B build-tsan "${common[@]}" -DCOMM_SANITIZE=thread -DCOMM_WITH_UCX=OFF -DCOMM_WITH_OFI=OFF \
  -DCOMM_WITH_GLOO=OFF -DCOMM_WITH_MPI=OFF -DCOMM_BUILD_TOOLS=OFF >/dev/null
cmake --build build-tsan -j"$jobs"
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
  ctest --test-dir build-tsan --output-on-failure --no-tests=error -j"$jobs" -L unit \
    -E "^schedules: "
