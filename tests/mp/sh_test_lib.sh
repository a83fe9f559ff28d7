# Sourced by the shell tests (commrun_test.sh, tools_test.sh) after they set
# CASE: a scratch directory removed on exit, and helpers that run a command
# and check its exit code and output.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/comm-sh-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
OUT=$WORK/out
ERR=$WORK/err

fail() {
  echo "FAIL ($CASE): $*"
  echo "--- stdout"; cat "$OUT" 2>/dev/null
  echo "--- stderr"; cat "$ERR" 2>/dev/null
  exit 1
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# run <command...>: runs it (after $RUNNER, if set), sets RC and MS (elapsed ms).
run() {
  t0=$(now_ms)
  ${RUNNER:+"$RUNNER"} "$@" >"$OUT" 2>"$ERR"
  RC=$?
  MS=$(( $(now_ms) - t0 ))
}
expect_rc() { [ "$RC" -eq "$1" ] || fail "exit code $RC, expected $1"; }
expect_in() { grep -q -- "$2" "$1" || fail "'$2' not found in $(basename "$1")"; }
expect_not_in() { ! grep -q -- "$2" "$1" || fail "'$2' unexpectedly in $(basename "$1")"; }
