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
# writes results/selection/*.json (tools/bench/repredict.py re-predicts them
# with another build, from each run's own tuning file). Measure on a quiet
# machine: every rank needs a core. Usage: tools/selection-check.sh
#   RUNS=3 (sweeps per transport; medians of the runs), ITERS=40, ROUNDS=4
#   (comm-bench --rounds: every algorithm takes a turn of ITERS/ROUNDS
#   iterations per round, so a slow spell of the machine hits them alike), MAX=64M,
#   TRANSPORTS="ucx_shm ucx_tcp ofi_shm ofi_tcp gloo shm", COMM_BUILD_DIR=build,
#   TCP_CC=host: the TCP variants run over the host's loopback as it is
#   configured; TCP_CC=<algorithm> (root) runs each of their jobs in a network
#   namespace of its own whose loopback uses that TCP congestion control, the
#   host's setting untouched. Under bbr, loopback exchanges of 512 KiB and more
#   take twice as long in some jobs or phases as in others (UCX tcp, 2 MiB:
#   780-830 us or 1540-1690; cubic: 770-830 in every job), which no calibration
#   made before can foresee.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${COMM_BUILD_DIR:-build}
runs=${RUNS:-1}
iters=${ITERS:-40}
rounds=${ROUNDS:-4}
max=${MAX:-64M}
transports=${TRANSPORTS:-"ucx_shm ucx_tcp ofi_shm ofi_tcp gloo shm"}
out=results/selection
tcp_cc=${TCP_CC:-host}
host_cc=$(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo unknown)
if [ "$tcp_cc" != host ] && [ "$(id -u)" != 0 ]; then
  echo "selection-check: TCP_CC=$tcp_cc needs root (a network namespace per job); unset it to run as the host is" >&2
  exit 2
fi
if [ "$tcp_cc" != host ] && ! grep -qw -- "$tcp_cc" /proc/sys/net/ipv4/tcp_available_congestion_control 2>/dev/null; then
  echo "selection-check: TCP_CC=$tcp_cc is not one of this kernel's congestion controls:" \
    "$(cat /proc/sys/net/ipv4/tcp_available_congestion_control 2>/dev/null)" >&2
  exit 2
fi
if [ -z "${SKIP_BUILD:-}" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j"$(nproc)" --target commrun comm-bench comm-gloo-compare tcp-floor >/dev/null
fi
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.txt "$out"/*.launch
devices=(UCX_NET_DEVICES=lo FI_TCP_IFACE=lo FI_NET_IFACE=lo COMM_IFACE=127.0.0.1)
export "${devices[@]}"
unset COMM_CALIBRATE COMM_TUNING_FILE COMM_ALGO COMM_DETERMINISTIC
if [ "$tcp_cc" = host ]; then cc_said="$host_cc, as the host is set"; else cc_said="$tcp_cc (the host: $host_cc)"; fi
echo "selection-check: loopback TCP congestion control: $cc_said" | tee "$out/tcp-cc.txt" >&2
# over_tcp <command...>: as it is, or in a namespace of its own (TCP_CC).
over_tcp() {
  if [ "$tcp_cc" = host ]; then
    "$@"
  else
    unshare -n sh -c 'ip link set lo up && sysctl -qw net.ipv4.tcp_congestion_control="$0" && exec "$@"' \
      "$tcp_cc" "$@"
  fi
}

for variant in $transports; do
  case $variant in
    ucx_shm) t=ucx; vars=(UCX_TLS=shm); wire=shm ;;
    ucx_tcp) t=ucx; vars=(UCX_TLS=tcp); wire=tcp ;;
    ofi_shm) t=ofi; vars=(FI_PROVIDER=shm COMM_OFI_PROVIDER=shm); wire=shm ;;
    ofi_tcp) t=ofi; vars=("FI_PROVIDER=tcp;ofi_rxm" "COMM_OFI_PROVIDER=tcp;ofi_rxm"); wire=tcp ;;
    gloo) t=gloo; vars=(); wire=tcp ;;
    shm) t=shm; vars=(); wire=shm ;;
    *) echo "selection-check: unknown transport variant '$variant'" >&2; exit 2 ;;
  esac
  launch=(env)
  [ "$wire" = tcp ] && launch=(over_tcp env)
  # How comm-info re-creates this variant's links (tools/bench/repredict.py).
  echo "$t ${devices[*]} ${vars[*]}" >"$out/$variant.launch"
  for ((run = 1; run <= runs; run++)); do
    cache=$out/cache-$variant-$run
    rm -rf "$cache"
    echo "selection-check: $variant run $run/$runs (calibrates into $cache)" >&2
    "${launch[@]}" "${vars[@]}" XDG_CACHE_HOME="$PWD/$cache" COMM_LOG=info "$build"/bin/commrun -n 2 -- \
      "$build"/bin/comm-bench --transport "$t" --coll allreduce --algo all -b 8 -e "$max" -f 4 -n "$iters" \
      --rounds "$rounds" --quiet \
      --json "$out/$variant-$run.json" >"$out/$variant-$run.txt" 2>"$out/$variant-$run.log"
    grep -h "init: tuning:" "$out/$variant-$run.log" | head -1 >&2 || true
    if [ "$wire" = tcp ] && [ ! -e "$out/tcp-floor-$run.txt" ]; then
      over_tcp "$build"/bin/tcp-floor -b 8 -e "$max" -f 4 -n "$iters" >"$out/tcp-floor-$run.txt"
    fi
    if [ "$t" = gloo ]; then
      over_tcp env XDG_CACHE_HOME="$PWD/$cache" COMM_TRANSPORT=gloo "$build"/bin/commrun -n 2 --bind none --no-prefix -- \
        "$build"/bin/comm-gloo-compare --sweep 8 "$max" 4 "$iters" | grep -v '^\[r' >"$out/gloo-own-$run.txt"
    fi
  done
done
python3 tools/bench/selection_report.py "$out"
