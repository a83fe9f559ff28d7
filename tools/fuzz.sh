#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and fuzzes each for
# FUZZ_SECONDS (default 60) starting from the checked-in corpus. Exit status
# is non-zero if a target crashes, leaks or times out.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
out=${FUZZ_BUILD_DIR:-build-fuzz}
mkdir -p "$out"
cxx=${CXX_FUZZ:-clang++}
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -Iinclude -I. -Isrc -DCOMM_STATIC_DEFINE -pthread)
common=(src/core/types.cpp src/core/error.cpp src/util/log.cpp src/bootstrap/config.cpp src/util/units.cpp
        src/bootstrap/launcher_env.cpp)
store=(src/bootstrap/store_memory.cpp src/bootstrap/store_tcp.cpp src/bootstrap/store_tcp_server.cpp src/util/socket_util.cpp src/util/sha256.cpp
       src/bootstrap/store_file.cpp src/bootstrap/store_tcp_requests.cpp src/util/process.cpp)

"$cxx" "${flags[@]}" tests/fuzz/fuzz_override.cpp src/select/override_parser.cpp "${common[@]}" -o "$out/fuzz_override"
"$cxx" "${flags[@]}" tests/fuzz/fuzz_store.cpp "${store[@]}" "${common[@]}" -o "$out/fuzz_store"
"$cxx" "${flags[@]}" tests/fuzz/fuzz_json.cpp src/util/json.cpp -o "$out/fuzz_json"

for target in override store json; do
  corpus="$out/corpus-$target"
  mkdir -p "$corpus"
  cp -n tests/fuzz/corpus/$target/* "$corpus"/ 2>/dev/null || true
  echo "fuzz: $target for ${seconds}s"
  status=0
  "$out/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "$corpus" >"$out/fuzz_$target.log" 2>&1 || status=$?
  grep -E "^(stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)" "$out/fuzz_$target.log" || true
  if [ "$status" -ne 0 ]; then
    tail -40 "$out/fuzz_$target.log"
    echo "fuzz: $target FAILED (exit $status); crashing input saved in $PWD" >&2
    exit "$status"
  fi
done
