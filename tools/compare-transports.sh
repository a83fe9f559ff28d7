#!/usr/bin/env bash
# The main job of the README: every transport available here x every
# all-reduce algorithm, 2 ranks, 8 B to 64 MiB, side by side in one run;
# ends with the summary table (fastest vs automatic choice per size) and
# writes results/compare.json and results/compare.svg.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh

build=${COMM_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target commrun comm-bench comm_nccl 2>/dev/null ||
  cmake --build "$build" -j"$(nproc)" --target commrun comm-bench
mkdir -p results
# Loopback only on a single host; on a real cluster drop these to let each library choose.
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo} FI_TCP_IFACE=${FI_TCP_IFACE:-lo} FI_NET_IFACE=${FI_NET_IFACE:-lo}
"$build"/bin/commrun -n 2 -- "$build"/bin/comm-bench --coll allreduce --transport all --algo all \
  -b 8 -e 64M -f 4 --json results/compare.json --plot results/compare.svg "$@"
