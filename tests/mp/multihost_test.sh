#!/bin/sh
# Multi-host tests on emulated hosts: multihost_test.sh <rig> <case> [args...]
#   run NAME [rig args...] -- program...  runs the rig as --name NAME and passes its
#                                     exit status on (77: no namespaces here, a skip)
#   cleanup NAME <commrun>            a failing job, a job stopped by SIGTERM, and a
#                                     rig killed by SIGKILL (swept by the next rig)
# Every case then checks that no namespace of NAME is left (`ip netns list`);
# cleanup also runs the rigs with a TMPDIR of its own and checks that it ends
# empty (commrun's directories of a killed launcher included).
set -u
RIG=$1
CASE=$2
shift 2
NAME=$1
shift
left() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^cmh\.[0-9]+\.$NAME\." ; }
# start_rig LAYOUT: the rig running `sleep 100` in the background (its pid in
# $pid) once its namespaces exist.
start_rig() {
  "$RIG" --name "$NAME" --commrun "$COMMRUN" --layout "$1" -- sleep 100 &
  pid=$!
  i=0
  while [ -z "$(left)" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  [ -n "$(left)" ] || { echo "FAIL: the rig never created its namespaces"; exit 1; }
  sleep 0.5
}
check_clean() {
  if [ -n "$(left)" ]; then
    echo "FAIL: namespaces left behind: $(left | tr '\n' ' ')"
    exit 1
  fi
}
case $CASE in
run)
  "$RIG" --name "$NAME" "$@"
  rc=$?
  [ $rc -eq 77 ] && exit 77
  check_clean
  [ $rc -eq 0 ] && echo "PASS ($NAME); no namespaces left"
  exit $rc
  ;;
cleanup)
  COMMRUN=$1
  TMPDIR=$(mktemp -d)
  export TMPDIR
  trap 'rm -rf "$TMPDIR"' EXIT
  "$RIG" --name "$NAME" --commrun "$COMMRUN" --layout 1,1 -- sh -c 'exit 3'
  rc=$?
  [ $rc -eq 77 ] && exit 77
  [ $rc -eq 3 ] || { echo "FAIL: a failing rank gave rig exit code $rc, expected 3"; exit 1; }
  check_clean
  # SIGTERM while the ranks run: the trap removes everything.
  start_rig 2,1
  kill -TERM $pid
  wait $pid
  rc=$?
  [ $rc -eq 143 ] || { echo "FAIL: SIGTERM gave rig exit code $rc, expected 143"; exit 1; }
  check_clean
  # SIGKILL: nothing can clean up now; the next rig sweeps what is left.
  start_rig 1,1
  kill -KILL $pid
  wait $pid 2>/dev/null
  [ -n "$(left)" ] || { echo "FAIL: expected the SIGKILLed rig's namespaces to remain until swept"; exit 1; }
  "$RIG" --name "${NAME}_sweeper" --commrun "$COMMRUN" --layout 1 -- true || { echo "FAIL: the sweeping rig failed"; exit 1; }
  check_clean
  if [ -n "$(ls -A "$TMPDIR")" ]; then
    echo "FAIL: files left in the rigs' TMPDIR: $(ls -A "$TMPDIR" | tr '\n' ' ')"
    exit 1
  fi
  echo "PASS (cleanup): failure, SIGTERM and SIGKILL leave no namespaces and nothing in TMPDIR"
  ;;
*)
  echo "unknown case $CASE"
  exit 2
  ;;
esac
