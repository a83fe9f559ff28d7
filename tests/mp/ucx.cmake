# UCX transport (label `ucx`): the shared collective suite over shared memory
# and over TCP on loopback, the fault test, and the transport's own checks
# (comm-ucx-p2p: point-to-point semantics, link kinds, failure, ping-pong).
# UCX_TLS / UCX_NET_DEVICES choose UCX's transports; nothing else is forced.
comm_mp_program(comm-ucx-p2p ${CMAKE_CURRENT_LIST_DIR}/ucx_p2p.cpp)

set(COMM_UCX_ENV_shm UCX_TLS=shm COMM_TRANSPORT=ucx)
set(COMM_UCX_ENV_tcp UCX_TLS=tcp UCX_NET_DEVICES=lo COMM_TRANSPORT=ucx)

foreach(tls shm tcp)
  # Full suite on 2 and 3 ranks, the quick one on 4 (this machine has 2 cores).
  foreach(n 2 3)
    comm_mp_test(NAME mp_ucx_suite_${tls}_${n} RANKS ${n} LABELS mp ucx TIMEOUT 300
      ENV ${COMM_UCX_ENV_${tls}} COMMAND comm-mp-suite)
  endforeach()
  comm_mp_test(NAME mp_ucx_suite_${tls}_4 RANKS 4 LABELS mp ucx TIMEOUT 300
    ENV ${COMM_UCX_ENV_${tls}} COMMAND comm-mp-suite --quick)
  # Rank 1 dies inside its 5th all-reduce; the others must fail naming it.
  comm_mp_test(NAME mp_ucx_fault_${tls}_3 RANKS 3 LABELS mp ucx TIMEOUT 120
    ENV ${COMM_UCX_ENV_${tls}} COMMRUN_ARGS --allow-fail 1
    COMMAND comm-mp-suite --kill-rank 1 --kill-after 5)
  comm_mp_test(NAME mp_ucx_p2p_${tls}_3 RANKS 3 LABELS mp ucx TIMEOUT 120
    ENV ${COMM_UCX_ENV_${tls}} COMMAND comm-ucx-p2p check)
  comm_mp_test(NAME mp_ucx_p2p_cancel_send_${tls} RANKS 2 LABELS mp ucx TIMEOUT 60
    ENV ${COMM_UCX_ENV_${tls}} COMMAND comm-ucx-p2p cancel-send)
  comm_mp_test(NAME mp_ucx_p2p_fault_${tls}_3 RANKS 3 LABELS mp ucx TIMEOUT 120
    ENV ${COMM_UCX_ENV_${tls}} COMMRUN_ARGS --allow-fail 1
    COMMAND comm-ucx-p2p fault --kill 1)
endforeach()

# Rank 0 (which hosts the store) dies in the first all-reduce while the
# others wait in tree's step 0 for its eager message: UCX over shared memory
# does not notice (no operation touches the dead peer's memory), so only the
# communicator's check of same-host pids can end the wait, naming rank 0.
comm_mp_test(NAME mp_ucx_fault_silent_shm_3 RANKS 3 LABELS mp ucx TIMEOUT 120
  ENV ${COMM_UCX_ENV_shm} COMM_ALGO=allreduce=tree COMMRUN_ARGS --allow-fail 0 --timeout 20
  COMMAND comm-mp-suite --kill-rank 0 --kill-after 0 --linger)

# Two local ranks: shared memory under UCX_TLS=shm, with the UCX transport named.
comm_mp_test(NAME mp_ucx_links_shm RANKS 2 LABELS mp ucx TIMEOUT 60
  ENV ${COMM_UCX_ENV_shm} COMMAND comm-ucx-p2p links --expect-kind shm --expect-lane "sysv/|posix/|xpmem/")
comm_mp_test(NAME mp_ucx_links_tcp RANKS 2 LABELS mp ucx TIMEOUT 60
  ENV ${COMM_UCX_ENV_tcp} COMMAND comm-ucx-p2p links --expect-kind tcp --expect-lane tcp/lo)
