#!/bin/sh
# Tests of commrun, one case per invocation: commrun_test.sh <commrun> <case>.
# Ranks are small sh scripts; every case checks exit codes, timing and output
# against what it asked the ranks to do.
set -u
COMMRUN=$1
CASE=$2
RUNNER=$COMMRUN  # run <commrun args...>
. "$(dirname "$0")/sh_test_lib.sh"

case $CASE in
exit_code)
  run -n 4 -- sh -c 'exit $(( COMM_RANK == 2 ? 7 : 0 ))'
  expect_rc 7
  expect_in "$ERR" "rank 2 exited with code 7"
  run -n 3 -- sh -c 'exit 0'
  expect_rc 0
  ;;
sibling_kill)
  # Rank 1 fails after 0.3 s; the others would sleep forever.
  run -n 3 -- sh -c 'if [ "$COMM_RANK" = 1 ]; then sleep 0.3; exit 3; fi; sleep 1000'
  expect_rc 3
  [ "$MS" -lt 10000 ] || fail "took $MS ms; the sleeping ranks were not stopped"
  expect_in "$ERR" "rank 1 exited with code 3; stopping the other 2 ranks"
  ;;
prefixes)
  run -n 2 -- sh -c 'echo "out $COMM_RANK"; echo "err $COMM_RANK" >&2; printf "no newline $COMM_RANK"'
  expect_rc 0
  expect_in "$OUT" '^\[r0\] out 0$'
  expect_in "$OUT" '^\[r1\] out 1$'
  expect_in "$OUT" '^\[r1\] no newline 1$'
  expect_in "$ERR" '^\[r0\] err 0$'
  expect_in "$ERR" '^\[r1\] err 1$'
  expect_not_in "$OUT" 'err'
  # Many long lines from 4 ranks at once: none may be split or interleaved.
  run -n 4 -- sh -c 'i=0; line=$(printf "%0200d" 0); while [ $i -lt 2000 ]; do echo "$COMM_RANK:$line"; i=$((i+1)); done'
  expect_rc 0
  total=$(wc -l <"$OUT")
  good=$(grep -c -E '^\[r([0-3])\] \1:0{200}$' "$OUT")
  [ "$total" -eq 8000 ] || fail "$total lines, expected 8000"
  [ "$good" -eq 8000 ] || fail "only $good of 8000 lines are whole and correctly prefixed"
  ;;
signal_name)
  run -n 2 -- sh -c 'if [ "$COMM_RANK" = 0 ]; then kill -SEGV $$; fi; sleep 1000'
  expect_rc 139
  expect_in "$ERR" "rank 0 was killed by signal SIGSEGV (11)"
  [ "$MS" -lt 10000 ] || fail "took $MS ms"
  ;;
timeout)
  run -n 2 --timeout 1 -- sleep 1000
  expect_rc 124
  expect_in "$ERR" "timed out after 1 s"
  [ "$MS" -ge 900 ] && [ "$MS" -lt 10000 ] || fail "took $MS ms for --timeout 1"
  # A rank that ignores SIGTERM (and the SIGUSR1 asking for dumps) is killed after the grace period.
  run -n 1 --timeout 0.5 --grace 0.5 -- sh -c 'trap "" TERM USR1; sleep 1000'
  expect_rc 124
  expect_in "$ERR" "sending SIGKILL"
  [ "$MS" -lt 10000 ] || fail "took $MS ms"
  ;;
environment)
  run -n 3 --transport ucx -- sh -c 'echo "$COMM_RANK $COMM_WORLD_SIZE $COMM_LOCAL_RANK $COMM_TRANSPORT $COMM_STORE $COMM_STORE_TOKEN"'
  expect_rc 0
  for r in 0 1 2; do expect_in "$OUT" "^\[r$r\] $r 3 $r ucx 127\.0\.0\.1:[0-9][0-9]* [0-9a-f]\{16,\}$"; done
  [ "$(cut -d' ' -f6,7 "$OUT" | sort -u | wc -l)" -eq 1 ] || fail "ranks got different stores or tokens"
  first=$(cut -d' ' -f7 "$OUT" | head -1)
  run -n 1 -- sh -c 'echo "$COMM_STORE_TOKEN"'
  [ "$(cut -d' ' -f2 "$OUT")" != "$first" ] || fail "two jobs got the same token"
  ;;
sigterm)
  # SIGTERM to commrun stops every rank (and what the ranks started).
  "$COMMRUN" -n 3 -- sh -c 'echo $$ > '"$WORK"'/pid.$COMM_RANK; sleep 1000' >"$OUT" 2>"$ERR" &
  pid=$!
  i=0
  while [ "$(ls "$WORK" | grep -c '^pid\.')" -lt 3 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
  kill -TERM $pid
  wait $pid
  RC=$?
  expect_rc 143
  expect_in "$ERR" "received SIGTERM"
  sleep 0.2
  for f in "$WORK"/pid.*; do
    ! kill -0 "$(cat "$f")" 2>/dev/null || fail "rank process $(cat "$f") still alive"
  done
  ;;
temp_dirs)
  # commrun's own directories (exit notes, flight dumps) live under TMPDIR and
  # are gone when the job ends, also when a rank failed.
  mkdir "$WORK/tmp"
  TMPDIR="$WORK/tmp" run -n 2 -- sh -c 'echo "$COMM_EXIT_NOTES $COMM_DUMP_DIR"; ls -d "$COMM_EXIT_NOTES" "$COMM_DUMP_DIR" >/dev/null || exit 5; exit $COMM_RANK'
  expect_rc 1
  expect_in "$OUT" "^\[r0\] $WORK/tmp/commrun-exits-[^ /]* $WORK/tmp/commrun-[^ /]*$"
  [ -z "$(ls -A "$WORK/tmp")" ] || fail "left in TMPDIR: $(ls -A "$WORK/tmp")"
  ;;
allow_fail)
  run -n 3 --allow-fail 1 -- sh -c 'if [ "$COMM_RANK" = 1 ]; then kill -KILL $$; fi; sleep 0.3; echo done $COMM_RANK'
  expect_rc 0
  expect_in "$ERR" "rank 1 was killed by signal SIGKILL (9) (allowed by --allow-fail)"
  expect_in "$OUT" '^\[r0\] done 0$'
  expect_in "$OUT" '^\[r2\] done 2$'
  ;;
bind)
  # What each rank may run on, against this shell's own set (computed here).
  mine=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
  ncpu=$(nproc)
  show='sed -n "s/^Cpus_allowed_list:[[:space:]]*/$COMM_RANK /p" /proc/self/status'
  run -n 1 --bind none -- sh -c "$show"
  expect_rc 0
  expect_in "$OUT" "^\[r0\] 0 $mine\$"
  run -n $((ncpu + 1)) -- sh -c "$show"
  expect_rc 0
  [ "$(grep -c " $mine\$" "$OUT")" -eq $((ncpu + 1)) ] || fail "more ranks than CPUs must stay unbound"
  if [ "$ncpu" -ge 2 ]; then
    COMM_LOG=info run -n 2 -- sh -c "$show"
    expect_rc 0
    expect_in "$ERR" "rank 0 bound to CPU"
    expect_in "$ERR" "rank 1 bound to CPU"
    a=$(sed -n 's/^\[r0\] 0 //p' "$OUT"); b=$(sed -n 's/^\[r1\] 1 //p' "$OUT")
    [ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ] && [ "$a" != "$mine" ] || fail "ranks not bound apart: '$a' '$b' (allowed '$mine')"
    run -n 1 --bind core -- sh -c "$show"
    expect_not_in "$OUT" " $mine\$"
  fi
  run -n 1 --bind sockets -- true
  expect_rc 2
  expect_in "$ERR" "--bind 'sockets' is not valid"
  ;;
no_prefix)
  run -n 2 --no-prefix -- sh -c 'echo "out $COMM_RANK"; echo "err $COMM_RANK" >&2'
  expect_rc 0
  expect_in "$OUT" '^out 0$'
  expect_in "$OUT" '^out 1$'
  expect_in "$ERR" '^err 1$'
  expect_not_in "$OUT" 'r0'
  ;;
missing_program)
  run -n 2 -- /nonexistent/program
  expect_rc 127
  expect_in "$ERR" "cannot run '/nonexistent/program': No such file or directory (ENOENT)"
  # A name looked up on PATH: one message naming it and errno, nothing about signals.
  for i in 1 2 3 4 5; do
    run -n 4 comm-no-such-program
    expect_rc 127
    [ "$(cat "$OUT" "$ERR" | wc -l)" -eq 1 ] || fail "expected one line of output"
    expect_in "$ERR" "^commrun: cannot run 'comm-no-such-program': No such file or directory (ENOENT); it is not a file in any PATH directory$"
  done
  run -n 2 -- "$WORK"
  expect_rc 126
  expect_in "$ERR" "cannot run '$WORK': Permission denied (EACCES)"
  run -n 0 -- true
  expect_rc 2
  ;;
bad_transport)
  # A transport name is a plain name: it becomes part of libcomm_<name>.so.
  run -n 2 --transport ../../etc/x -- true
  expect_rc 2
  expect_in "$ERR" "commrun: --transport '../../etc/x' is not valid: expected a transport name"
  expect_in "$ERR" "this build has: local"
  ;;
arguments)
  # One parser for every tool (src/util/cli): both value forms, errors that
  # name the option, generated help.
  run -n2 -- sh -c 'echo "size $COMM_WORLD_SIZE"'
  expect_rc 0
  expect_in "$OUT" '^\[r1\] size 2$'
  run --np=3 --transport=local -- sh -c 'echo "t=$COMM_TRANSPORT n=$COMM_WORLD_SIZE"'
  expect_rc 0
  expect_in "$OUT" '^\[r2\] t=local n=3$'
  run -n 2 --tiemout 5 -- true
  expect_rc 2
  expect_in "$ERR" "unknown option '--tiemout' (did you mean --timeout?)"
  expect_in "$ERR" "valid options: .*--allow-fail"
  run -n 2 --timeout soon -- true
  expect_rc 2
  expect_in "$ERR" "timeout 'soon' is not valid: expected a number greater than 0"
  run -n 2 --allow-fail 1,x -- true
  expect_rc 2
  expect_in "$ERR" "allow-fail '1,x' is not valid"
  run -n 2 --grace
  expect_rc 2
  expect_in "$ERR" "grace needs a value"
  run -n 2
  expect_rc 2
  expect_in "$ERR" "no program given"
  run --help
  expect_rc 0
  expect_in "$OUT" "^usage: commrun -n N"
  expect_in "$OUT" "^  -n, -np, --np N"
  ;;
multinode)
  # Node 1 of 2 in torchrun's terms: global ranks 2, 3; --master as the store;
  # the environment's token (or none), never a fresh one per node.
  run --nnodes 2 --node-rank 1 --master 10.0.0.1:29400 -n 2 -- sh -c 'echo "$COMM_RANK $COMM_WORLD_SIZE $COMM_LOCAL_RANK $COMM_STORE ${COMM_STORE_TOKEN-none}"'
  expect_rc 0
  expect_in "$OUT" '^\[r2\] 2 4 0 10\.0\.0\.1:29400 none$'
  expect_in "$OUT" '^\[r3\] 3 4 1 10\.0\.0\.1:29400 none$'
  COMM_STORE_TOKEN=shared run --nnodes 2 --node-rank 0 --master h:1 -n 1 -- sh -c 'echo "$COMM_RANK $COMM_STORE_TOKEN"'
  expect_in "$OUT" '^\[r0\] 0 shared$'
  # Uneven nodes: explicit offset and world size; --allow-fail names global ranks.
  run --nnodes 3 --node-rank 2 --master h:1 -n 1 --rank-offset 3 --world-size 4 --allow-fail 3 -- sh -c 'echo "$COMM_RANK/$COMM_WORLD_SIZE"; exit 5'
  expect_rc 0
  expect_in "$OUT" '^\[r3\] 3/4$'
  expect_in "$ERR" "rank 3 exited with code 5 (allowed by --allow-fail)"
  for bad in "--nnodes 2 -n 1" "--nnodes 2 --node-rank 2 --master h:1 -n 1" "--nnodes 2 --master h -n 1" \
             "--nnodes 2 --node-rank 1 --master h:1 -n 2 --rank-offset 0" "--nnodes 2 --node-rank 1 --master h:1 -n 3 --world-size 4"; do
    run $bad -- true
    expect_rc 2
  done
  run --nnodes 2 --node-rank 1 --master h:1 -n 3 --world-size 4 -- true
  expect_in "$ERR" "would start global ranks 3..5 but the job has 4"
  ;;
*)
  echo "unknown case $CASE"
  exit 2
  ;;
esac
echo "PASS ($CASE)"
