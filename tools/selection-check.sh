#!/usr/bin/env bash
# Issue 17's targets, measured: for every host transport (ucx shm and tcp, ofi
# shm and tcp, gloo, comm's own shm) on 2 ranks, after the default calibration (a fresh cache
# per transport, so each job calibrates at creation as users' first job does):
#   - auto <= 1.10 x the best fixed algorithm at every size 8 B - 64 MiB;
#   - pred_us within +-25 % of the measured median for every algorithm >= 4 KiB;
#   - no gloo algorithm above 2 x Gloo's own allreduce at the same size,
#     measured side by side (comm-gloo-compare --sweep, commrun --bind none:
#     Gloo's own context bound one core per rank stalls 4 ms per message).
# Beside the TCP transports (ucx_tcp, ofi_tcp, gloo) it runs tcp-floor, the
# bare loopback exchange of 2 processes, and prints each transport's best
# time per size against that floor's p10/median/p90: what the wire itself
# gives and how much it varies here.
# Prints one table per transport and size and a verdict line per target;
# writes results/selection/*.json. Measure on a quiet machine: every rank
# needs a core. Usage: tools/selection-check.sh
#   RUNS=3 (sweeps per transport; medians of the runs), ITERS=40, ROUNDS=4
#   (comm-bench --rounds: every algorithm takes a turn of ITERS/ROUNDS
#   iterations per round, so a slow spell of the machine hits them alike), MAX=64M,
#   TRANSPORTS="ucx_shm ucx_tcp ofi_shm ofi_tcp gloo shm", COMM_BUILD_DIR=build
set -euo pipefail
cd "$(dirname "$0")/.."
build=${COMM_BUILD_DIR:-build}
runs=${RUNS:-1}
iters=${ITERS:-40}
rounds=${ROUNDS:-4}
max=${MAX:-64M}
transports=${TRANSPORTS:-"ucx_shm ucx_tcp ofi_shm ofi_tcp gloo shm"}
out=results/selection
if [ -z "${SKIP_BUILD:-}" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j"$(nproc)" --target commrun comm-bench comm-gloo-compare tcp-floor >/dev/null
fi
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.txt
export UCX_NET_DEVICES=lo FI_TCP_IFACE=lo FI_NET_IFACE=lo COMM_IFACE=127.0.0.1
unset COMM_CALIBRATE COMM_TUNING_FILE COMM_ALGO COMM_DETERMINISTIC

for variant in $transports; do
  case $variant in
    ucx_shm) t=ucx; vars=(UCX_TLS=shm) ;;
    ucx_tcp) t=ucx; vars=(UCX_TLS=tcp) ;;
    ofi_shm) t=ofi; vars=(FI_PROVIDER=shm COMM_OFI_PROVIDER=shm) ;;
    ofi_tcp) t=ofi; vars=("FI_PROVIDER=tcp;ofi_rxm" "COMM_OFI_PROVIDER=tcp;ofi_rxm") ;;
    gloo) t=gloo; vars=() ;;
    shm) t=shm; vars=() ;;
    *) echo "selection-check: unknown transport variant '$variant'" >&2; exit 2 ;;
  esac
  for ((run = 1; run <= runs; run++)); do
    cache=$out/cache-$variant-$run
    rm -rf "$cache"
    echo "selection-check: $variant run $run/$runs (calibrates into $cache)" >&2
    env "${vars[@]}" XDG_CACHE_HOME="$PWD/$cache" COMM_LOG=info "$build"/bin/commrun -n 2 -- \
      "$build"/bin/comm-bench --transport "$t" --coll allreduce --algo all -b 8 -e "$max" -f 4 -n "$iters" \
      --rounds "$rounds" --quiet \
      --json "$out/$variant-$run.json" >"$out/$variant-$run.txt" 2>"$out/$variant-$run.log"
    grep -h "init: tuning:" "$out/$variant-$run.log" | head -1 >&2 || true
    case $variant in
      ucx_tcp | ofi_tcp | gloo)
        [ -e "$out/tcp-floor-$run.txt" ] || "$build"/bin/tcp-floor -b 8 -e "$max" -f 4 -n "$iters" >"$out/tcp-floor-$run.txt" ;;
    esac
    if [ "$t" = gloo ]; then
      env XDG_CACHE_HOME="$PWD/$cache" COMM_TRANSPORT=gloo "$build"/bin/commrun -n 2 --bind none --no-prefix -- \
        "$build"/bin/comm-gloo-compare --sweep 8 "$max" 4 "$iters" | grep -v '^\[r' >"$out/gloo-own-$run.txt"
    fi
  done
done
python3 tools/bench/selection_report.py "$out"
