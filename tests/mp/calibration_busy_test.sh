#!/usr/bin/env bash
# A job that calibrates while other work keeps every CPU busy uses what it
# measured but does not cache it, and says why (COMM_LOG=info); with
# COMM_CALIBRATION_BUSY_LIMIT=1 the same busy job caches as asked.
#   calibration_busy_test.sh <commrun> <comm-bench> <transport>
set -u
COMMRUN=$1 BENCH=$2 TRANSPORT=$3
CASE=setup
. "$(dirname "$0")/sh_test_lib.sh"
hogs=""
trap 'kill $hogs 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq "$(nproc)"); do
  sh -c 'while :; do :; done' &
  hogs="$hogs $!"
done
export XDG_CACHE_HOME=$WORK/cache COMM_LOG=info COMM_CALIBRATE=1
job() { run "$COMMRUN" -n 2 --timeout 100 -- "$BENCH" --transport "$TRANSPORT" --algo all -b 64K -e 64K -n 3 -w 1 --quiet; }

CASE="busy, limit 0.2"
COMM_CALIBRATION_BUSY_LIMIT=0.2 job
expect_rc 0
expect_in "$ERR" "tuning: calibrated at creation ([0-9]* ms), not cached: other work kept [0-9]* % of CPUs [0-9,-]* of rank 0's host busy while it measured (COMM_CALIBRATION_BUSY_LIMIT 20 %)"
[ ! -e "$XDG_CACHE_HOME/comm" ] || fail "the busy job cached: $(ls "$XDG_CACHE_HOME/comm")"
share=$(sed -n "s/.*other work kept \([0-9]*\) % of CPUs.*/\1/p" "$ERR" | head -1)
# nproc spinning shells against 2 ranks: about half of every CPU, never all of it.
[ "$share" -gt 20 ] && [ "$share" -le 100 ] || fail "other work's share $share % is not above the 20 % limit"

CASE="busy, limit 1"
COMM_CALIBRATION_BUSY_LIMIT=1 job
expect_rc 0
expect_in "$ERR" "tuning: calibrated at creation ([0-9]* ms), saved to $XDG_CACHE_HOME/comm/tuning-"
expect_not_in "$ERR" "not cached"
echo "calibration under load on $TRANSPORT: other work kept $share % busy; not cached at limit 0.2, cached at limit 1"
