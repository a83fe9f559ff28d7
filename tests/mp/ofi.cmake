# libfabric (OFI) transport, label `ofi`: the shared collective suite over
# tcp;ofi_rxm on loopback and over shm, the fault test over tcp;ofi_rxm, the
# transport's own point-to-point checks (comm-ofi-test, ranks as threads) and
# a two-process ping-pong (comm-ofi-pingpong) that checks every payload and
# prints the floor next to what fi_pingpong measures.
#
# Provider names contain ';', which CMake lists split on: it is written `\;`
# here and reaches the test's environment as a plain ';'.

comm_mp_program(comm-ofi-test ${CMAKE_CURRENT_LIST_DIR}/ofi_transport_test.cpp LIBRARIES doctest::doctest)
doctest_discover_tests(comm-ofi-test TEST_PREFIX "ofi_unit: " PROPERTIES LABELS ofi TIMEOUT 120)

comm_mp_program(comm-ofi-pingpong ${CMAKE_CURRENT_LIST_DIR}/ofi_pingpong.cpp)

set(COMM_OFI_ENV_tcp COMM_TRANSPORT=ofi "FI_PROVIDER=tcp\;ofi_rxm" "COMM_OFI_PROVIDER=tcp\;ofi_rxm"
    FI_TCP_IFACE=lo FI_NET_IFACE=lo)
set(COMM_OFI_ENV_shm COMM_TRANSPORT=ofi FI_PROVIDER=shm)

foreach(prov tcp shm)
  # Full suite on 2 ranks, the quick one on 3 and 4 (the machine has 2 cores).
  comm_mp_test(NAME mp_ofi_suite_${prov}_2 RANKS 2 LABELS mp ofi TIMEOUT 300
    ENV ${COMM_OFI_ENV_${prov}} COMMAND comm-mp-suite)
  foreach(n 3 4)
    comm_mp_test(NAME mp_ofi_suite_${prov}_${n} RANKS ${n} LABELS mp ofi TIMEOUT 300
      ENV ${COMM_OFI_ENV_${prov}} COMMAND comm-mp-suite --quick)
  endforeach()
  comm_mp_test(NAME mp_ofi_pingpong_${prov} RANKS 2 LABELS mp ofi TIMEOUT 120
    ENV ${COMM_OFI_ENV_${prov}} COMMAND comm-ofi-pingpong --iters 2000 --large-iters 10)
endforeach()

# Rank 1 dies inside its 5th all-reduce; the others must fail naming it within
# seconds (tcp;ofi_rxm: connection errors and liveness probes).
comm_mp_test(NAME mp_ofi_fault_tcp_3 RANKS 3 LABELS mp ofi TIMEOUT 120
  ENV ${COMM_OFI_ENV_tcp} COMMRUN_ARGS --allow-fail 1
  COMMAND comm-mp-suite --kill-rank 1 --kill-after 5)
# The same over shm, where only the same-host process check can notice.
comm_mp_test(NAME mp_ofi_fault_shm_3 RANKS 3 LABELS mp ofi TIMEOUT 120
  ENV ${COMM_OFI_ENV_shm} COMMRUN_ARGS --allow-fail 1
  COMMAND comm-mp-suite --kill-rank 1 --kill-after 5)

# A killed shm rank's /dev/shm region is removed (by commrun, and by the
# survivors' transport when no launcher does it).
add_test(NAME mp_ofi_shm_cleanup
  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/shm_cleanup_test.sh $<TARGET_FILE:commrun> $<TARGET_FILE:comm-fault-target>)
set_tests_properties(mp_ofi_shm_cleanup PROPERTIES LABELS "mp;ofi" TIMEOUT 120)
