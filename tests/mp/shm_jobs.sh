#!/bin/sh
# Job-level checks of the shm transport: shm_jobs.sh <commrun> <suite> <case>
#   kill  rank 1 SIGKILLs itself inside its 5th all-reduce: the survivors fail
#         naming it (comm-mp-suite checks that), and none of the job's
#         segments remains in /dev/shm afterwards
#   orphan  a rank creates a segment named as rank 0 of a job does
#         (/comm-shm-<its pid>-<32 hex>), as if the job were killed before
#         every rank mapped it, and is SIGKILLed: commrun must remove it
#   two   two 3-rank jobs run the quick suite at the same time on this host:
#         both pass, and their segments differ
# The segment names come from the ranks' own log lines (COMM_LOG=info), so
# other jobs on the machine cannot disturb the check.
set -u
COMMRUN=$1
SUITE=$2
CASE=$3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/shm-jobs.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL ($CASE): $*"; for f in "$WORK"/*.log; do echo "--- $f"; tail -40 "$f"; done; exit 1; }
segments() { grep -o 'on segment /comm-shm-[0-9]*-[0-9a-f]*' "$1" | sed 's/on segment //' | sort -u; }
export COMM_TRANSPORT=shm COMM_LOG=info
case $CASE in
  kill)
    "$COMMRUN" -n 3 --timeout 100 --allow-fail 1 -- "$SUITE" --kill-rank 1 --kill-after 5 >"$WORK/job.log" 2>&1 ||
      fail "the job failed"
    names=$(segments "$WORK/job.log")
    [ -n "$names" ] || fail "no segment names in the log"
    for s in $names; do [ ! -e "/dev/shm$s" ] || fail "/dev/shm$s is left behind"; done
    for s in $names; do
      pid=$(sed -n 's/.*:\([0-9]*\) r0 comm INFO transport: shm: rank 0 .*/\1/p' "$WORK/job.log" | head -1)
      case $s in "/comm-shm-$pid-"*) ;; *) fail "segment $s does not carry rank 0's pid ($pid)" ;; esac
    done
    echo "PASS: segments $names gone after the kill"
    ;;
  orphan)
    "$COMMRUN" -n 1 --timeout 60 --allow-fail 0 -- sh -c \
      'touch /dev/shm/comm-shm-$$-0123456789abcdef0123456789abcdef && echo "made $$" && kill -9 $$' \
      >"$WORK/job.log" 2>&1 || fail "commrun failed"
    pid=$(sed -n 's/.*made \([0-9]*\).*/\1/p' "$WORK/job.log")
    [ -n "$pid" ] || fail "the rank did not make its segment"
    [ ! -e "/dev/shm/comm-shm-$pid-0123456789abcdef0123456789abcdef" ] || fail "the orphaned segment is left behind"
    grep -q "removed 1 shared-memory file" "$WORK/job.log" || fail "commrun did not say it removed the segment"
    echo "PASS: commrun removed the segment of its dead rank $pid"
    ;;
  two)
    "$COMMRUN" -n 3 --timeout 200 -- "$SUITE" --quick >"$WORK/a.log" 2>&1 &
    a=$!
    "$COMMRUN" -n 3 --timeout 200 -- "$SUITE" --quick >"$WORK/b.log" 2>&1 &
    b=$!
    wait $a || fail "job A failed"
    wait $b || fail "job B failed"
    sa=$(segments "$WORK/a.log")
    sb=$(segments "$WORK/b.log")
    [ -n "$sa" ] && [ -n "$sb" ] || fail "no segment names in the logs"
    for s in $sa; do echo "$sb" | grep -qx -- "$s" && fail "both jobs used segment $s"; done
    for s in $sa $sb; do [ ! -e "/dev/shm$s" ] || fail "/dev/shm$s is left behind"; done
    echo "PASS: two jobs at once, segments A: $sa B: $sb"
    ;;
  *) echo "unknown case $CASE"; exit 2 ;;
esac
