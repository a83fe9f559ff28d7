#!/bin/sh
# A rank that freezes (SIGSTOP) is named: every survivor times out at
# COMM_TIMEOUT naming it as the rank that has not entered the collective,
# also those that wait on it only through another rank (4 ranks, a ring),
# and commrun --timeout says it is stopped.
#   freeze_test.sh <commrun> <comm-fault-target> <transport>
set -u
COMMRUN=$1 TARGET=$2 T=$3
out=$(COMM_TIMEOUT=3 COMM_ALGO="allreduce=ring" "$COMMRUN" -n 4 --timeout 12 --grace 1 --transport "$T" \
      --allow-fail 0,1,2,3 -- "$TARGET" --victim 2 --freeze-after 7 2>&1)
rc=$?
echo "$out"
fail() { echo "FAIL: $*"; exit 1; }
[ $rc -eq 124 ] || fail "commrun exited $rc, expected 124 (the frozen rank outlives --timeout)"
named=$(echo "$out" | grep -c "fault-target: rank [013]: error after .* timeout: .*rank 2 has not entered allreduce #7")
[ "$named" -eq 3 ] || fail "$named of 3 survivors named rank 2 as the rank that has not entered allreduce #7"
echo "$out" | grep -q "commrun: rank [013] exited with code" && fail "a survivor exited with an error"
echo "$out" | grep -q "commrun:   rank 2 (pid [0-9]*) is stopped" || fail "commrun did not say that rank 2 is stopped"
echo "PASS"
