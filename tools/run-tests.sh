#!/usr/bin/env bash
# The test command of the README (and of CI): installs what is missing, builds
# everything with warnings as errors, and runs every test tier.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh

build=${COMM_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOMM_WARNINGS_AS_ERRORS=ON
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure --no-tests=error
