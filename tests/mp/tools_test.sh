#!/bin/sh
# Messages of comm-info, comm-bench and the library when something is wrong,
# one case per invocation: tools_test.sh <bin dir> <case>. Each case runs the
# real tools and checks exit codes and what they print.
set -u
BIN=$1
CASE=$2
. "$(dirname "$0")/sh_test_lib.sh"

case $CASE in
bad_transport_name)
  # Never reaches dlopen; names where the name came from and lists the transports.
  COMM_TRANSPORT=../../etc/x run "$BIN/comm-info"
  expect_rc 2
  expect_in "$ERR" "COMM_TRANSPORT='../../etc/x' is not valid: expected a transport name"
  expect_in "$ERR" "this build has: local"
  expect_not_in "$ERR" "libcomm_\.\./"
  run "$BIN/comm-bench" --transport ../x -b 8 -e 8
  expect_rc 2
  expect_in "$ERR" "--transport '../x': '../x' is not valid"
  expect_in "$ERR" "available: .*local.*, or all"
  expect_not_in "$ERR" "libcomm_\.\./"
  COMM_TRANSPORT=carrier_pigeon run "$BIN/comm-bench" -b 8 -e 8
  expect_rc 2
  expect_in "$ERR" "COMM_TRANSPORT 'carrier_pigeon': could not load libcomm_carrier_pigeon.so"
  expect_in "$ERR" "available: .*local"
  run "$BIN/comm-info" --transport "UCX"
  expect_rc 2
  expect_in "$ERR" "--transport 'UCX': 'UCX' is not valid"
  ;;
bench_algo_list)
  # --algo a,b: exactly those side by side plus auto, then the summary; a
  # name the collective lacks is refused naming it and listing the valid ones.
  COMM_CALIBRATE=0 run "$BIN/commrun" -n 2 --transport shm -- "$BIN/comm-bench" --algo mem_oneshot,ring,ring -b 8 -e 32 -n 5 -c 1
  expect_rc 0
  for algo in mem_oneshot ring 'auto\([a-z_]*\)'; do
    [ "$(grep -cE "^\[r0\] +(8|32) +[0-9]+ +f32 +sum +- +$algo " "$OUT")" -eq 2 ] || fail "no row per size for $algo"
  done
  [ "$(grep -cE '^\[r0\] +(8|32) +[0-9]+ +f32 ' "$OUT")" -eq 6 ] || fail "rows other than mem_oneshot, ring and auto (ring listed twice runs once)"
  expect_in "$OUT" "# summary (shm): fastest algorithm per size vs the automatic pick"
  expect_in "$OUT" "# wrong elements: 0 OK"
  # No transport named (one process: local): the summary names the one chosen.
  COMM_CALIBRATE=0 run "$BIN/comm-bench" --algo ring,tree -b 8 -e 8 -n 5
  expect_rc 0
  expect_in "$OUT" "# summary (local): fastest algorithm per size vs the automatic pick"
  COMM_CALIBRATE=0 run "$BIN/commrun" -n 2 --transport shm -- "$BIN/comm-bench" --algo ring,bogus -b 8 -e 8
  expect_rc 2
  expect_in "$ERR" "--algo 'ring,bogus': allreduce on transport 'shm' has no algorithm 'bogus' (valid: ring, "
  ;;
comm_info_nccl)
  run "$BIN/comm-info"
  expect_rc 0
  [ -e "$BIN/../lib/libcomm_nccl.so" ] || { echo "SKIPPED: this build has no NCCL plugin (libcomm_nccl.so)"; exit 77; }
  # Whether a GPU is usable, asked of the driver's own tool, not of comm.
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    expect_in "$OUT" "^  nccl     available$"
  else
    expect_in "$OUT" "^  nccl     unavailable: it loads, but a communicator cannot be made here: .*no CUDA device"
  fi
  ;;
bench_transport_failure)
  # Rank 1 is killed mid-run: rank 0 must report the failure, not "0 OK".
  # No start-up calibration: on a busy machine it can outlast the 2 s before
  # the kill, which must land in the run (a death during creation is
  # reported by the creation tests).
  COMM_CALIBRATE=0 run "$BIN/commrun" -n 2 --allow-fail 1 --timeout 100 -- sh -c '
    if [ "$COMM_RANK" = 1 ]; then (sleep 2; kill -KILL $$) & fi
    exec "$0" --transport ucx --coll allreduce -b 4M -e 4M -n 100000 -w 1 -c 1 --quiet' "$BIN/comm-bench"
  [ "$RC" -ne 0 ] || fail "exit code 0 after the transport failed"
  expect_in "$OUT" "^\[r0\] # FAILED: rank 0: transport ucx failed during allreduce: .*rank 1"
  expect_in "$OUT" "^\[r0\] # wrong elements: 0 so far; FAILED: transport ucx failed, the run is incomplete"
  expect_not_in "$OUT" "OK$"
  ;;
store_refused)
  # Nothing listens on port 1: said while retrying and at the end, within COMM_TIMEOUT.
  t0=$(date +%s)
  COMM_RANK=1 COMM_WORLD_SIZE=2 COMM_STORE=127.0.0.1:1 COMM_TIMEOUT=5 run "$BIN/comm-info"
  t1=$(date +%s)
  expect_rc 1
  expect_in "$ERR" " r1 comm WARN bootstrap: store: nothing is listening at 127.0.0.1:1 (connections refused for 2 s); retrying"
  expect_in "$ERR" "^comm-info: store: nothing is listening at 127.0.0.1:1: every connection was refused for 5000 ms"
  [ $((t1 - t0)) -le 8 ] || fail "took $((t1 - t0)) s with COMM_TIMEOUT=5"
  ;;
comm_info_locale)
  # The tools never call setlocale, so a comma-decimal environment changes nothing
  # (the library's own numbers are covered by test_locale, under the global locale).
  LC_ALL=de_DE.UTF-8 LANG=de_DE.UTF-8 run "$BIN/comm-info" --size 1M
  expect_rc 0
  grep -qE '^ +[a-z_]+ +[0-9]+\.[0-9]{2} us' "$OUT" || fail "no candidate cost printed as digits.digits"
  grep -qE '[0-9],[0-9]{2} us|[0-9]+,[0-9]{2}x the best' "$OUT" && fail "a number was printed with a decimal comma"
  ;;
launcher_precedence)
  # mpirun inside a Slurm allocation: the allocation's SLURM_* (a 1-task step)
  # survive into every process; mpirun's own variables must win.
  run "$BIN/commrun" -n 2 --transport ucx -- sh -c '
    export OMPI_COMM_WORLD_RANK=$COMM_RANK OMPI_COMM_WORLD_SIZE=$COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK=$COMM_RANK
    export SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0
    unset COMM_RANK COMM_WORLD_SIZE COMM_LOCAL_RANK
    exec "$0" --size 8' "$BIN/comm-info"
  expect_rc 0
  expect_in "$OUT" "^\[r0\] comm-info: comm [0-9.]*, 2 ranks, transport ucx$"
  ;;
world_size_mismatch|duplicate_rank)
  # Every rank must fail within seconds naming the problem (all allowed to fail,
  # so that commrun waits for each instead of stopping the others).
  if [ "$CASE" = world_size_mismatch ]; then
    fix='[ "$COMM_RANK" = 1 ] && export COMM_WORLD_SIZE=2'
    want="rank 1 (.*) was started for a world of 2 ranks, but rank 0 for 3"
  else
    fix='[ "$COMM_RANK" = 2 ] && export COMM_RANK=1 COMM_LOCAL_RANK=1'
    want="rank 1 is claimed by two processes"
  fi
  t0=$(date +%s)
  COMM_TIMEOUT=30 run "$BIN/commrun" -n 3 --transport ucx --allow-fail 0,1,2 -- sh -c "$fix"'
    exec "$0" --size 8' "$BIN/comm-info"
  t1=$(date +%s)
  [ "$(grep -c "^\[r[0-2]\] comm-info: store at .*: $want" "$ERR")" -eq 3 ] ||
    fail "expected all 3 ranks to fail with: $want"
  [ "$(grep -c "exited with code 2 (allowed by --allow-fail)" "$ERR")" -eq 3 ] || fail "expected 3 ranks to exit with 2"
  [ $((t1 - t0)) -le 15 ] || fail "took $((t1 - t0)) s"
  ;;
*)
  echo "unknown case $CASE"
  exit 2
  ;;
esac
echo "PASS ($CASE)"
