#!/usr/bin/env bash
# Fault injection: for each transport, RUNS jobs of 3 ranks in which a random
# rank SIGKILLs itself inside a random all-reduce of a loop; every survivor
# must fail with a comm::Error naming the dead rank within 10 s (comm-mp-suite
# checks that and exits non-zero otherwise). --linger keeps each survivor
# until all have seen their error, so each must detect the death itself and
# none is blamed for a sibling's exit. A job still running after 40 s counts
# as a hang. Usage: tools/fault-loop.sh [RUNS] [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/fault-common.sh
fault_args 50 "$@"
suite=$build/bin/comm-mp-suite
transports=${FAULT_TRANSPORTS:-"ucx ofi gloo"}
status=0
for t in $transports; do
  loopback_env "$t"
  named=0 hangs=0 other=0
  for ((i = 0; i < runs; i++)); do
    rank=$((RANDOM % 3))
    after=$((RANDOM % 20))
    # Start-up calibration as a user gets it (measured, or read from the
    # tuning cache): what it picks decides which waits a death must end.
    log=$(env "${env_vars[@]}" "$commrun" -n 3 --timeout 40 --transport "$t" --allow-fail "$rank" -- \
      "$suite" --kill-rank "$rank" --kill-after "$after" --linger 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then
      named=$((named + 1))
    elif [ $rc -eq 124 ]; then
      hangs=$((hangs + 1))
      echo "fault-loop: $t run $i (kill rank $rank after $after): HANG"; echo "$log" | tail -20
    else
      other=$((other + 1))
      echo "fault-loop: $t run $i (kill rank $rank after $after): exit $rc"; echo "$log" | tail -20
    fi
  done
  echo "fault-loop: $t: $runs runs, $named with every survivor naming the dead rank, $hangs hangs, $other other failures"
  [ $((hangs + other)) -eq 0 ] || status=1
done
exit $status
