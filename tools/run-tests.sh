#!/usr/bin/env bash
# The test command of the README (and of CI). Installs what is missing, then:
#   1. builds everything with warnings as errors and runs every ctest tier
#      (unit, multi-process per transport, examples, the installed-package consumer);
#   2. fault injection: ranks SIGKILLed at random points (start-up included), on every transport;
#   3. the Conan recipe, offline, with its test_package;
#   4. sanitizers (ASan+UBSan: unit and multi-process; TSan: threaded unit tests);
#   5. fuzzing the store's frame parser and the COMM_ALGO parser.
# COMM_TEST_STAGES limits the stages, e.g. COMM_TEST_STAGES="build" for a quick run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh

stages=${COMM_TEST_STAGES:-"build faults conan sanitizers fuzz"}
build=${COMM_BUILD_DIR:-build}
stage() { [[ " $stages " == *" $1 "* ]]; }
banner() { echo; echo "=== $* ($(date +%T))"; }

if stage build; then
  banner "build and ctest"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOMM_WARNINGS_AS_ERRORS=ON
  cmake --build "$build" -j"$(nproc)"
  # Two at a time: the slow ones (the pip install, the multi-process suites) mostly wait.
  ctest --test-dir "$build" --output-on-failure --no-tests=error -j"$(nproc)"
fi
if stage faults; then
  banner "fault injection"
  bash tools/fault-loop.sh "${COMM_FAULT_RUNS:-8}" "$build"
  # Kills at any moment, start-up included, 3-5 ranks, on every transport
  # (the full campaign of issue 13 is: tools/kill-campaign.sh 30).
  bash tools/kill-campaign.sh "${COMM_CAMPAIGN_RUNS:-3}" "$build"
fi
if stage conan; then
  banner "conan create (offline)"
  export CONAN_HOME=${CONAN_HOME:-$PWD/$build/conan-home}
  conan profile detect --force >/dev/null
  conan create conan/ -pr:a conan/profiles/system --build=missing --no-remote \
    -o "comm/*:with_ucx=True" -o "comm/*:with_gloo=True"
fi
if stage sanitizers; then
  banner "sanitizers"
  bash tools/sanitize.sh
fi
if stage fuzz; then
  banner "fuzzing"
  FUZZ_SECONDS=${FUZZ_SECONDS:-60} bash tools/fuzz.sh
fi
banner "all stages passed: $stages"
