#!/usr/bin/env bash
# One prepared check of the NCCL transport on a machine with NVIDIA GPUs:
#   1. installs what is missing and can be installed (NCCL's pip wheel,
#      doctest-dev through apt when apt can reach its mirror),
#   2. configures and builds comm with COMM_WITH_NCCL=ON into a fresh build
#      directory (kernels only for the GPUs present: CMAKE_CUDA_ARCHITECTURES=native),
#   3. runs the ctest label `nccl` (single-GPU tests, and the multi-process
#      suite when there are at least 2 GPUs),
#   4. runs the ctest label `gpu`: the CUDA-IPC direct-memory all-reduce
#      (transports/cuda_ipc) in 2 processes on one device — every dtype/op,
#      8 B-64 MiB, graph capture and replay — printing its launch-plus-flag
#      floor and latencies into the summary,
#   5. runs a short all-reduce benchmark, native against our ring/direct/...
#      schedules, on all GPUs of the machine (1 rank: NCCL's figures beside
#      the CUDA-IPC latencies of step 4).
# Meant to finish in under 8 minutes; every phase has its own time limit.
#
# Usage: tools/gpu-check.sh [build-dir]     (default: <repo>/build-gpu-check, wiped first)
# Environment:
#   OUT                 logs are written there when set (else <build-dir>/logs)
#   COMM_DOCTEST_ROOT   for offline machines without doctest-dev: a folder holding
#                       doctest/doctest.h, doctest.cmake and doctestAddTests.cmake, made on
#                       a machine that has doctest-dev with
#                         mkdir -p R/doctest && cp /usr/include/doctest/doctest.h R/doctest/ &&
#                         cp /usr/lib/cmake/doctest/doctest.cmake /usr/lib/cmake/doctest/doctestAddTests.cmake R/
#   COMM_BENCH_MAX      largest benchmark size in bytes (default 67108864)
#   COMM_BUILD_TIMEOUT  seconds allowed for the build (default 300; 16 cores need ~60)
#   COMM_TEST_TIMEOUT   seconds allowed for each test phase (default 240; the benchmark gets half)
#   COMM_GPU_MPS=1      also run the CUDA-IPC test under the MPS daemon when the machine has
#                       nvidia-cuda-mps-control: without MPS two processes on one GPU take
#                       turns in time slices, so a kernel spinning on a peer's flag waits for
#                       the peer's slice; under MPS both kernels run at once
# Exit status: 0 when the build and every nccl and gpu test passed (skips allowed), 1 otherwise.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu-check}
logs=${OUT:-$build/logs}
bench_max=${COMM_BENCH_MAX:-67108864}
jobs=$(nproc 2>/dev/null || echo 4)
test_limit=${COMM_TEST_TIMEOUT:-240}

rm -rf "$build"
mkdir -p "$build" "$logs"
summary=$logs/summary.txt
: >"$summary"
note() { echo "gpu-check: $*" | tee -a "$summary"; }
phase_failed=0

# ---- 1. the machine and what it lacks
{
  date -u
  uname -a
  nvidia-smi 2>&1 || echo "nvidia-smi: not available"
  nvidia-smi topo -m 2>&1 || true
  echo "MPS control: $(command -v nvidia-cuda-mps-control || echo none)"
} >"$logs/machine.txt" 2>&1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
note "GPUs visible to nvidia-smi: ${gpus:-0}"

if ! command -v nvcc >/dev/null 2>&1; then
  for d in "${CUDA_HOME:-}" /usr/local/cuda; do
    if [ -n "$d" ] && [ -x "$d/bin/nvcc" ]; then export PATH="$d/bin:$PATH"; break; fi
  done
fi
command -v nvcc >/dev/null 2>&1 && note "nvcc: $(nvcc --version | tail -1)" ||
  note "nvcc not found: the plugin will be built without the stream engine (native only)"

if ! python3 -c "import nvidia.nccl" >/dev/null 2>&1; then
  note "NCCL wheel missing: pip install nvidia-nccl-cu13"
  python3 -m pip install -q nvidia-nccl-cu13 >>"$logs/install.txt" 2>&1 ||
    python3 -m pip install -q --break-system-packages nvidia-nccl-cu13 >>"$logs/install.txt" 2>&1 ||
    note "could not install nvidia-nccl-cu13 (offline?); configure will look for NCCL elsewhere"
fi

prefix_args=()
if [ -n "${COMM_DOCTEST_ROOT:-}" ]; then
  # Debian's package config hard-codes /usr; this one points at the folder given.
  doctest_root=$(cd "$COMM_DOCTEST_ROOT" && pwd)
  mkdir -p "$build/_doctest"
  cat >"$build/_doctest/doctestConfig.cmake" <<EOF
if(NOT TARGET doctest::doctest)
  list(APPEND CMAKE_MODULE_PATH "$doctest_root")
  add_library(doctest::doctest INTERFACE IMPORTED)
  set_target_properties(doctest::doctest PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "$doctest_root")
endif()
EOF
  prefix_args+=("-Ddoctest_DIR=$build/_doctest")
elif [ ! -f /usr/lib/cmake/doctest/doctestConfig.cmake ] && command -v apt-get >/dev/null 2>&1; then
  note "doctest missing: apt-get install doctest-dev"
  { timeout 60 apt-get update -qq && timeout 120 apt-get install -y -qq doctest-dev; } >>"$logs/install.txt" 2>&1 ||
    note "could not install doctest-dev; set COMM_DOCTEST_ROOT"
fi

# ---- 2. configure and build (only what the nccl label needs; the host
# transports are left out: they are not under test here)
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
cuda_ipc=OFF
command -v nvcc >/dev/null 2>&1 && cuda_ipc=ON  # the CUDA-IPC kernels need nvcc
arch=native
[ "${gpus:-0}" -gt 0 ] || arch="80-real;90"
if ! timeout 180 cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCOMM_WITH_NCCL=ON -DCOMM_WITH_CUDA=$cuda_ipc -DCOMM_WITH_UCX=OFF -DCOMM_WITH_OFI=OFF -DCOMM_WITH_GLOO=OFF \
    -DCOMM_BUILD_TOOLS=ON -DCOMM_BUILD_EXAMPLES=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch" "${prefix_args[@]}" \
    >"$logs/configure.txt" 2>&1; then
  note "configure FAILED (see configure.txt)"
  tail -30 "$logs/configure.txt"
  exit 1
fi
grep -E "comm: (NCCL|nccl|CUDA)" "$logs/configure.txt" | tee -a "$summary"
targets=(comm comm_nccl test_nccl test_nccl_nodevice test_nccl_plan nccl_suite nccl_bench)
targets+=(test_device_program)
[ "$cuda_ipc" = ON ] && targets+=(comm_cuda_ipc cuda_ipc_allreduce)
# commrun (tools/, on by default) runs the multi-process tests.
grep -q "add_executable(commrun" "$root/tools/CMakeLists.txt" 2>/dev/null && targets+=(commrun)
if ! timeout "${COMM_BUILD_TIMEOUT:-300}" cmake --build "$build" -j "$jobs" --target "${targets[@]}" >"$logs/build.txt" 2>&1; then
  note "build FAILED (see build.txt)"
  grep -E "error|Error" "$logs/build.txt" | head -30
  exit 1
fi
note "build ok"

# ---- 3. the nccl tests
if ! (cd "$build" && timeout "$test_limit" ctest -L nccl --output-on-failure --timeout $((test_limit - 20))) >"$logs/ctest.txt" 2>&1; then
  phase_failed=1
fi
grep -E "tests passed|Passed|Failed|Skipped|\\*\\*\\*" "$logs/ctest.txt" | tee -a "$summary"

# ---- 4. the CUDA-IPC direct-memory tests (verbose: their figures go to the summary)
if ! (cd "$build" && timeout "$test_limit" ctest -L gpu -V --timeout $((test_limit - 20))) >"$logs/ctest-gpu.txt" 2>&1; then
  phase_failed=1
fi
gpu_figures() {
  grep -E "tests passed|Failed|Skipped|SKIPPED|FAILED|sweep:|graph:|floor:|latency:|all checks passed" "$1" |
    sed 's/^[0-9]*: //' | tee -a "$summary"
}
gpu_figures "$logs/ctest-gpu.txt"

# ---- 4b. the same under MPS, where both processes' kernels run at once
if [ "${COMM_GPU_MPS:-0}" = 1 ] && command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/comm-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/comm-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then
    note "under MPS:"
    (cd "$build" && timeout $((test_limit / 2)) ctest -L gpu -R cuda_ipc -V --timeout $((test_limit / 2 - 10))) \
      >"$logs/ctest-gpu-mps.txt" 2>&1 || phase_failed=1
    gpu_figures "$logs/ctest-gpu-mps.txt"
    echo quit | nvidia-cuda-mps-control
  else
    note "MPS daemon did not start"
  fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi

# ---- 5. benchmark: one process per GPU when commrun is there
ranks=${gpus:-1}
[ "$ranks" -ge 1 ] || ranks=1
bench=("$build/bin/nccl_bench" "$bench_max")
if [ "$ranks" -gt 1 ] && [ -x "$build/bin/commrun" ]; then
  bench=("$build/bin/commrun" -n "$ranks" --timeout 100 -- "${bench[@]}")
fi
timeout $((test_limit / 2)) env COMM_TRANSPORT=nccl "${bench[@]}" >"$logs/bench.txt" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then
  note "benchmark ($ranks rank(s)):"
  tee -a "$summary" <"$logs/bench.txt"
elif [ "$rc" -eq 77 ]; then
  note "benchmark skipped: $(grep -m1 SKIPPED "$logs/bench.txt")"
else
  note "benchmark FAILED or timed out (see bench.txt)"
  tail -20 "$logs/bench.txt"
  phase_failed=1
fi

if [ "$phase_failed" -ne 0 ]; then
  note "some nccl or gpu checks FAILED"
elif [ "${gpus:-0}" -eq 0 ]; then
  note "no GPU here: build and non-GPU checks passed, GPU tests were SKIPPED"
else
  note "all nccl and gpu checks passed"
fi
exit "$phase_failed"
