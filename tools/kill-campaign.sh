#!/usr/bin/env bash
# Kill campaign: for each transport, RUNS jobs of 3-5 ranks (comm-fault-target
# under commrun) in which one random rank is SIGKILLed (or, with
# CAMPAIGN_SIGNAL=STOP, frozen) at a random moment from its fork on: before it
# starts, during communicator creation, or inside an all-reduce of 16 B to
# 4 MiB. Every survivor must fail with an error that names that rank and exit.
# Prints per transport: hangs (the job still running after CAMPAIGN_HANG_S),
# median and maximum time from the kill to the last survivor's exit, and the
# share of survivors whose error names the dead rank; then the failures.
#
# Usage: tools/kill-campaign.sh [RUNS] [BUILD_DIR]
#   CAMPAIGN_TRANSPORTS  default "ucx-shm ucx-tcp ofi-tcp ofi-shm gloo" (+ "shm" when built)
#   CAMPAIGN_SIGNAL      KILL (default) or STOP
#   CAMPAIGN_MAX_DELAY_MS  kills happen 0..this after the fork (default 2500)
#   CAMPAIGN_HANG_S      commrun --timeout for a job (default 40)
#   COMM_TIMEOUT         passed to the ranks (default 20; a freeze is only seen at it)
# Logs of runs with a hang, a slow exit or an unnamed victim are kept in
# CAMPAIGN_LOGS (default BUILD_DIR/kill-campaign-logs).
# Exit status: 0 when there were no hangs and every survivor named the victim.
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/fault-common.sh
fault_args 30 "$@"
target=$build/bin/comm-fault-target
sig=${CAMPAIGN_SIGNAL:-KILL}
max_delay=${CAMPAIGN_MAX_DELAY_MS:-2500}
hang_s=${CAMPAIGN_HANG_S:-40}
export COMM_TIMEOUT=${COMM_TIMEOUT:-20}
default_transports="ucx-shm ucx-tcp ofi-tcp ofi-shm gloo"
[ -d transports/shm ] && default_transports+=" shm"
transports=${CAMPAIGN_TRANSPORTS:-$default_transports}
[ -x "$target" ] || { echo "kill-campaign: $target is not built"; exit 2; }

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# The pid of the k-th child commrun forked (children are listed in fork
# order, and commrun forks rank 0 first); waits until it exists.
child_pid() {
  local parent=$1 k=$2 list
  for _ in $(seq 1 2000); do
    list=$(cat "/proc/$parent/task/$parent/children" 2>/dev/null) || return 1
    set -- $list
    if [ $# -gt "$k" ]; then shift "$k"; echo "$1"; return 0; fi
    sleep 0.001
  done
  return 1
}
# "[rN] /path/object(+0xOFF)[0xADDR]" -> "function at file:line (object)"
# when addr2line knows it, else the frame as printed.
resolve_frame() {
  local object offset where
  [[ $1 =~ ^\[r[0-9]+\]\ ([^\(]+)\(\+(0x[0-9a-f]+)\) ]] || { echo "${1#* }"; return; }
  object=${BASH_REMATCH[1]} offset=${BASH_REMATCH[2]}
  # A return address is the instruction after the call: look up the call.
  where=$(addr2line -f -C -p -e "$object" "$(printf '0x%x' $((offset - 1)))" 2>/dev/null)
  case $where in "" | "?? ??:0") echo "${1#* }" ;; *) echo "$where (${object##*/})" ;; esac
}
median() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }

status=0
work=$(mktemp -d "${TMPDIR:-/tmp}/kill-campaign.XXXXXX")
keep=${CAMPAIGN_LOGS:-$build/kill-campaign-logs}  # logs of the runs with a failure
trap 'rm -rf "$work"' EXIT
for t in $transports; do
  loopback_env "$t"
  env_vars+=(COMM_TRANSPORT="${t%%-*}")
  hangs=0 survivors=0 named=0 watchdog=0 times=() notes=()
  for ((i = 0; i < runs; i++)); do
    n=$((3 + RANDOM % 3))
    victim=$((RANDOM % n))
    delay=$(( (RANDOM * 32768 + RANDOM) % (max_delay + 1) ))
    log=$work/$t-$i.log
    allow=$(seq -s, 0 $((n - 1)))
    env "${env_vars[@]}" "$commrun" -n "$n" --timeout "$hang_s" --allow-fail "$allow" -- \
      "$target" --victim "$victim" --seconds $((hang_s / 2)) >"$log" 2>&1 &
    job=$!
    t_fork=$(now_ms)
    pid=$(child_pid "$job" "$victim")
    while [ $(( $(now_ms) - t_fork )) -lt "$delay" ]; do sleep 0.005; done
    [ -n "$pid" ] && kill -"$sig" "$pid" 2>/dev/null
    t_kill=$(now_ms)
    # Until every survivor has exited (a frozen victim stays: it is killed then).
    while others=$(cat "/proc/$job/task/$job/children" 2>/dev/null) &&
          [ -n "$(echo $others | tr ' ' '\n' | grep -vx "$pid")" ]; do
      sleep 0.02
    done
    t_end=$(now_ms)
    [ "$sig" = STOP ] && [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
    wait "$job"
    rc=$?
    secs=$(awk -v ms=$(( t_end - t_kill )) 'BEGIN {printf "%.3f", ms / 1000}')
    what="$t run $i: $n ranks, rank $victim ${sig}ed ${delay} ms after its fork"
    if [ $rc -eq 124 ]; then
      hangs=$((hangs + 1))
      notes+=("$what: HANG (still running after ${hang_s} s)")
      mkdir -p "$keep" && cp "$log" "$keep/"
      continue
    fi
    times+=("$secs")
    if awk -v s="$secs" 'BEGIN {exit !(s > 5)}'; then
      notes+=("$what: slow: the last survivor exited ${secs} s after the kill")
      mkdir -p "$keep" && cp "$log" "$keep/"
    fi
    for ((r = 0; r < n; r++)); do
      [ $r -eq $victim ] && continue
      survivors=$((survivors + 1))
      line=$(grep -m1 "^\[r$r\] fault-target: rank $r: " "$log")
      # commrun reports every rank that exits non-zero (3: the error did not name the victim).
      if [ -n "$line" ] && ! grep -q "^commrun: rank $r \(exited\|was killed\)" "$log"; then
        named=$((named + 1))
        continue
      fi
      # ofi over shm: a survivor stuck in the provider is ended by its watchdog (exit 70).
      if grep -q "^\[r$r\] comm\[$r\] error: ofi watchdog: .*rank $victim (pid" "$log" &&
         grep -q "^commrun: rank $r exited with code 70" "$log"; then
        named=$((named + 1)) watchdog=$((watchdog + 1))
        continue
      fi
      notes+=("$what: rank $r: ${line:-no error line} [$(grep "^commrun: rank $r " "$log" | head -1)]")
      # A crash prints its frames (comm-fault-target's handler); resolved here,
      # while the build that ran exists, since the CI log is all that is kept.
      while IFS= read -r frame; do notes+=("  $(resolve_frame "$frame")"); done < <(
        grep -A40 "^\[r$r\] fault-target: crashed" "$log" | grep "^\[r$r\] /" | head -40)
      mkdir -p "$keep" && cp "$log" "$keep/"
    done
  done
  total=${#times[@]}
  med=$(printf '%s\n' "${times[@]}" | grep . | median)
  max=$(printf '%s\n' "${times[@]}" | grep . | sort -n | tail -1)
  share=$(awk -v a=$named -v b=$survivors 'BEGIN {printf "%.1f", b ? 100 * a / b : 0}')
  echo "kill-campaign: $t: $runs ${sig} runs (3-5 ranks, 0-${max_delay} ms after fork): $hangs hangs;" \
       "time to the last survivor's exit: median ${med:--} s, max ${max:--} s ($total runs);" \
       "survivors naming the dead rank: $named/$survivors ($share %)" \
       "$([ $watchdog -gt 0 ] && echo "($watchdog of them ended by the ofi shm watchdog)")"
  for n in "${notes[@]}"; do echo "kill-campaign:   $n"; done
  [ $hangs -eq 0 ] && [ $named -eq $survivors ] || status=1
done
exit $status
