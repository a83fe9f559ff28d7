#!/bin/sh
# A rank killed while it runs libfabric's shm provider leaves its 16 MiB
# region in /dev/shm; it must not stay there, nor the survivors' (a survivor
# stuck in the provider's lock is ended by the transport's watchdog, which
# skips the endpoint's close). Checked twice: under commrun
# (which removes what a rank it reaps left) and with ranks started by hand,
# torchrun style, where the surviving ranks' ofi transport removes the files
# of the local peer it finds dead.
#   shm_cleanup_test.sh <commrun> <comm-fault-target>
set -u
COMMRUN=$1 TARGET=$2
export COMM_TRANSPORT=ofi FI_PROVIDER=shm COMM_OFI_PROVIDER=shm COMM_TIMEOUT=20
fail() { echo "FAIL: $*"; exit 1; }
# Waits until pid $1 has a region, kills it, and prints its pid.
kill_when_up() {
  for _ in $(seq 1 1000); do
    ls /dev/shm/comm-ofi-"$1"-* >/dev/null 2>&1 && break
    sleep 0.01
  done
  ls /dev/shm/comm-ofi-"$1"-* >/dev/null 2>&1 || fail "rank with pid $1 never created its shm region"
  sleep 0.3
  kill -KILL "$1"
}
check_gone() {
  for _ in $(seq 1 50); do
    ls /dev/shm/comm-ofi-"$1"-* >/dev/null 2>&1 || return 0
    sleep 0.1
  done
  fail "$2: /dev/shm/comm-ofi-$1-* is still there after the job: $(ls /dev/shm/comm-ofi-"$1"-*)"
}

# 1. Under commrun.
"$COMMRUN" -n 3 --timeout 40 --allow-fail 0,1,2 -- "$TARGET" --victim 1 --seconds 20 >/dev/null 2>&1 &
job=$!
ranks=
for _ in $(seq 1 500); do
  set -- $(cat /proc/$job/task/$job/children 2>/dev/null)
  [ $# -ge 3 ] && { ranks="$*"; victim=$2; break; }
  sleep 0.01
done
[ -n "$ranks" ] || fail "commrun did not start 3 ranks"
kill_when_up "$victim"
wait $job
for pid in $ranks; do check_gone "$pid" "under commrun"; done
echo "commrun: the files of killed rank 1 (pid $victim) and of the survivors are gone"

# 2. Started by hand: only the survivors' transports can clean up.
# The port lies below commrun's store-port range (see startup_torchrun.sh).
export WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(( 10000 + $$ % 6000 )) COMM_LOG=info
log=$(mktemp)
RANK=0 "$TARGET" --victim 1 --seconds 20 >"$log.0" 2>&1 &
p0=$!
RANK=1 "$TARGET" --victim 1 --seconds 20 >/dev/null 2>&1 &
p1=$!
RANK=2 "$TARGET" --victim 1 --seconds 20 >"$log.2" 2>&1 &
p2=$!
kill_when_up "$p1"
wait $p0 $p2 2>/dev/null
wait $p1 2>/dev/null
grep -h "removed .* shared-memory file(s) of dead rank 1" "$log.0" "$log.2" || {
  cat "$log.0" "$log.2"; rm -f "$log" "$log.0" "$log.2"; fail "no survivor removed rank 1's files"; }
rm -f "$log" "$log.0" "$log.2"
for pid in $p1 $p0 $p2; do check_gone "$pid" "started by hand"; done
echo "PASS"
