#!/bin/sh
# Two ranks started as torchrun starts them (RANK, WORLD_SIZE, MASTER_ADDR,
# MASTER_PORT; no commrun): rank 1 fails during creation (bad COMM_ALGO, then
# killed inside the transport's bootstrap); rank 0 must fail within 5 s naming
# rank 1 although COMM_TIMEOUT is 60 s. Last, rank 1 dies before it reaches
# the store, which nothing here can report: rank 0 names it at COMM_TIMEOUT
# (3 s then) as the rank that has not joined.
set -u
PROG=$1
# Below 16384, where commrun never draws its store port (it draws from the
# 16384 ports under the ephemeral range) and no outgoing connection lands.
port=$(( 10000 + $$ % 6000 ))
status=0
for mode in bad-config kill-in-transport kill-before-store; do
  port=$((port + 1))
  export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COMM_TIMEOUT=60
  expect=rank within=5
  [ $mode = kill-in-transport ] && expect="died: its connection to the store"
  # 3 s timeout, then rank 0 keeps the store up 2 s for rank 1 to read why.
  if [ $mode = kill-before-store ]; then COMM_TIMEOUT=3 expect="not joined" within=7; fi
  RANK=0 "$PROG" "$mode" 1 --within $within --expect "$expect" >"${TMPDIR:-/tmp}/startup-r0.$$" 2>&1 &
  r0=$!
  RANK=1 "$PROG" "$mode" 1 --within $within --expect "$expect" >"${TMPDIR:-/tmp}/startup-r1.$$" 2>&1
  wait $r0
  rc=$?
  echo "--- $mode: rank 0 (exit $rc)"; cat "${TMPDIR:-/tmp}/startup-r0.$$"
  echo "--- $mode: rank 1"; cat "${TMPDIR:-/tmp}/startup-r1.$$"
  rm -f "${TMPDIR:-/tmp}/startup-r0.$$" "${TMPDIR:-/tmp}/startup-r1.$$"
  [ $rc -eq 0 ] || status=1
done
exit $status
