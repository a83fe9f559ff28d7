# shm transport (label `shm`): the shared collective suite over the segment on
# 2, 3, 4, 6 and 8 ranks (oversubscribed on this 2-core machine: the quick
# suite from 4 up), with cross-memory reads and without (streamed rendezvous),
# and the fault test: rank 1 dies inside its 5th all-reduce; the others must
# fail naming it, and nothing of the job may remain in /dev/shm.
set(COMM_SHM_ENV COMM_TRANSPORT=shm)

foreach(n 2 3)
  comm_mp_test(NAME mp_shm_suite_${n} RANKS ${n} LABELS mp shm TIMEOUT 300
    ENV ${COMM_SHM_ENV} COMMAND comm-mp-suite)
endforeach()
foreach(n 4 6 8)
  comm_mp_test(NAME mp_shm_suite_${n} RANKS ${n} LABELS mp shm TIMEOUT 300
    ENV ${COMM_SHM_ENV} COMMAND comm-mp-suite --quick)
endforeach()
comm_mp_test(NAME mp_shm_suite_nocma_2 RANKS 2 LABELS mp shm TIMEOUT 300
  ENV ${COMM_SHM_ENV} COMM_SHM_CMA=0 COMMAND comm-mp-suite)
# A barrier lets nobody out before everyone is in: the direct one and the
# dissemination schedule over the rings, on 2 and 5 ranks.
comm_mp_program(comm-shm-barrier ${CMAKE_CURRENT_LIST_DIR}/shm_barrier.cpp)
foreach(algo mem_direct dissemination)
  foreach(n 2 5)
    comm_mp_test(NAME mp_shm_barrier_${algo}_${n} RANKS ${n} LABELS mp shm TIMEOUT 120
      ENV ${COMM_SHM_ENV} COMMAND comm-shm-barrier --algo ${algo} --rounds 100)
  endforeach()
endforeach()
# SIGKILL leaves nothing in /dev/shm, also when the whole job dies before
# every rank mapped the segment; two jobs at once do not meet.
foreach(case kill orphan two)
  add_test(NAME mp_shm_jobs_${case}
    COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/shm_jobs.sh $<TARGET_FILE:commrun> $<TARGET_FILE:comm-mp-suite> ${case})
  set_tests_properties(mp_shm_jobs_${case} PROPERTIES LABELS "mp;shm" TIMEOUT 240)
endforeach()
foreach(mode kill linger)
  set(extra)
  if(mode STREQUAL "linger")
    set(extra --linger)
  endif()
  comm_mp_test(NAME mp_shm_fault_${mode}_3 RANKS 3 LABELS mp shm TIMEOUT 120
    ENV ${COMM_SHM_ENV} COMMRUN_ARGS --allow-fail 1
    COMMAND comm-mp-suite --kill-rank 1 --kill-after 5 ${extra})
endforeach()
# Mismatched calls through the direct engine (op, also after repeated calls
# that take the repeat path; allreduce against broadcast) fail with mismatch
# naming both calls, on both ranks, and move no data.
# (The dtype case of comm-mp-mismatch forces the p2p 'direct' schedule: the
# core's stall diagnosis, as for the other transports.)
foreach(kind op op-repeated collective)
  comm_mp_test(NAME mp_mismatch_${kind}_shm RANKS 2 LABELS mp shm TIMEOUT 60
    ENV ${COMM_SHM_ENV} COMMAND $<TARGET_FILE:comm-mp-mismatch> ${kind})  # defined after this file
endforeach()
# The default path: no COMM_TRANSPORT, ranks in separate processes on one
# host -> transport auto, whose shm offers its peer memory, so automatic
# selection runs mem_* on the direct engine (no messages sent); results checked.
comm_mp_program(comm-shm-auto ${CMAKE_CURRENT_LIST_DIR}/shm_auto.cpp)
foreach(n 2 4)
  comm_mp_test(NAME mp_shm_auto_${n} RANKS ${n} LABELS mp shm TIMEOUT 120 COMMAND comm-shm-auto)
endforeach()
add_test(NAME mp_shm_auto_info COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/shm_auto_info.sh $<TARGET_FILE_DIR:commrun>)
set_tests_properties(mp_shm_auto_info PROPERTIES LABELS "mp;shm" TIMEOUT 90)
# The all-reduce that reads the peers' own buffers (cross-memory reads):
# bitwise mem_twoshot's and a rank-order fold, in place and out of place, on
# 2 and 3 ranks; with COMM_SHM_CMA=0 not eligible, and forcing it is an error
# naming why.
comm_mp_program(comm-shm-peer-reads ${CMAKE_CURRENT_LIST_DIR}/shm_peer_reads.cpp)
foreach(n 2 3)
  comm_mp_test(NAME mp_shm_peer_reads_${n} RANKS ${n} LABELS mp shm TIMEOUT 180
    ENV ${COMM_SHM_ENV} COMMAND comm-shm-peer-reads)
endforeach()
comm_mp_test(NAME mp_shm_peer_reads_off_2 RANKS 2 LABELS mp shm TIMEOUT 60
  ENV ${COMM_SHM_ENV} COMM_SHM_CMA=0 COMMAND comm-shm-peer-reads --off)
comm_mp_test(NAME mp_shm_peer_reads_off_forced_2 RANKS 2 LABELS mp shm TIMEOUT 60
  ENV ${COMM_SHM_ENV} COMM_SHM_CMA=0 COMM_ALGO=allreduce=mem_peer_twoshot COMMAND comm-shm-peer-reads --off)
# A timeout on the repeat path of a blocking all-reduce, which reads no clock
# before its first signal, still fires after the call's timeout, naming the
# rank that stayed away.
comm_mp_program(comm-shm-repeat-timeout ${CMAKE_CURRENT_LIST_DIR}/shm_repeat_timeout.cpp)
foreach(n 2 3)
  comm_mp_test(NAME mp_shm_repeat_timeout_${n} RANKS ${n} LABELS mp shm TIMEOUT 60
    ENV ${COMM_SHM_ENV} COMMAND comm-shm-repeat-timeout)
endforeach()
