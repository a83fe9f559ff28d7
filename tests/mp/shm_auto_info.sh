# comm-info on the default path: 2 ranks under commrun with no COMM_TRANSPORT
# report transport auto, links through auto's shm, and mem_oneshot/mem_twoshot
# among the all-reduce algorithms, automatic selection picking a mem_* one at 8 B.
#   sh shm_auto_info.sh <dir of commrun and comm-info>
CASE=shm_auto_info
. "$(dirname "$0")/sh_test_lib.sh"
bin=$1
run env -u COMM_TRANSPORT -u COMM_ALGO -u COMM_AUTO_INTRA COMM_CALIBRATE=0 \
  "$bin/commrun" -n 2 --timeout 60 -- "$bin/comm-info" --size 8
expect_rc 0
expect_in "$OUT" "transport auto"
expect_in "$OUT" "auto: shm"
expect_in "$OUT" "allreduce (algorithms:.* mem_oneshot"
expect_in "$OUT" "allreduce (algorithms:.* mem_twoshot"
expect_in "$OUT" "allreduce: auto picks mem_"
echo "PASS ($CASE)"
