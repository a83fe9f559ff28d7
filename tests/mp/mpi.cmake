# MPI transport (label `mpi`): the shared collective suite under mpirun on 2,
# 3 and 4 ranks (every algorithm, MPI's `native` included, blocking and
# polled), the transport's own point-to-point checks, an MPI program that initialises MPI itself and hands comm its
# communicators, the frozen-peer timeouts, and what a SIGKILLed rank does to
# an MPI job. No COMM_STORE: under mpirun the ranks meet through MPI.
#
# comm_mpi_test(NAME <name> RANKS <k> [LABELS <label>...] [ENV <VAR=VALUE>...]
#               [TIMEOUT <seconds>] [PASS <regex>] COMMAND <program-or-target> <args>...)
# adds a ctest running `mpirun -np k ... program args`, stopped by mpirun's own
# --timeout a few seconds below TIMEOUT. PASS makes the test pass on output
# matching <regex> (for jobs that end with MPI_Abort by design) and fail on
# "FAIL". Exit code 77 from a rank (mpirun passes it on) marks it skipped.
add_executable(comm-mpi-embed ${CMAKE_CURRENT_LIST_DIR}/mpi_embed.cpp)
target_link_libraries(comm-mpi-embed PRIVATE comm::comm MPI::MPI_C)
target_compile_definitions(comm-mpi-embed PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
comm_set_warnings(comm-mpi-embed)
foreach(prog timeout p2p)
  comm_mp_program(comm-mpi-${prog} ${CMAKE_CURRENT_LIST_DIR}/mpi_${prog}.cpp)
endforeach()

# Open MPI refuses root without these, and this machine has fewer cores than
# ranks; binding would pin ranks of concurrent tests to the same cores.
set(COMM_MPIRUN_ARGS "")
set(COMM_MPIRUN_ENV "")
execute_process(COMMAND ${COMM_MPIEXEC} --version OUTPUT_VARIABLE _comm_mpirun_version ERROR_QUIET)
if(_comm_mpirun_version MATCHES "Open MPI|OpenRTE")
  set(COMM_MPIRUN_ARGS --oversubscribe --bind-to none)
  set(COMM_MPIRUN_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1)
endif()

# Under ASan, LeakSanitizer must unwind through Open MPI's (unloaded) components
# to reach the libraries that tests/sanitizers/lsan.supp names.
if(COMM_SANITIZE MATCHES "address")
  list(APPEND COMM_MPIRUN_ENV
    "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/sanitizers/lsan.supp:fast_unwind_on_malloc=0")
endif()

function(comm_mpi_test)
  cmake_parse_arguments(PARSE_ARGV 0 T "" "NAME;RANKS;TIMEOUT;PASS" "LABELS;ENV;COMMAND")
  comm_test_job(120 5)
  set(timeout_args "")
  if(COMM_MPIRUN_ARGS)
    set(timeout_args --timeout ${job_timeout})
  endif()
  add_test(NAME ${T_NAME}
    COMMAND ${COMM_MPIEXEC} -np ${T_RANKS} ${COMM_MPIRUN_ARGS} ${timeout_args} ${program} ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "mp;mpi;${T_LABELS}" TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77
    ENVIRONMENT "COMM_TRANSPORT=mpi;${COMM_MPIRUN_ENV};${T_ENV}")
  if(T_PASS)
    set_tests_properties(${T_NAME} PROPERTIES PASS_REGULAR_EXPRESSION "${T_PASS}" FAIL_REGULAR_EXPRESSION "FAIL")
  endif()
endfunction()

# The suite: full on 2 and 3 ranks, quick on 4; MPI's non-blocking collectives too.
foreach(n 2 3)
  comm_mpi_test(NAME mp_mpi_suite_${n} RANKS ${n} TIMEOUT 300 COMMAND comm-mp-suite)
endforeach()
comm_mpi_test(NAME mp_mpi_suite_4 RANKS 4 TIMEOUT 300 COMMAND comm-mp-suite --quick)
comm_mpi_test(NAME mp_mpi_suite_native_poll_3 RANKS 3 TIMEOUT 120 ENV COMM_MPI_NATIVE=poll
  COMMAND comm-mp-suite --algo native)

# The transport's point-to-point semantics (1 MiB payload parts; ends with MPI_Abort by design).
foreach(n 2 3)
  comm_mpi_test(NAME mp_mpi_p2p_${n} RANKS ${n} TIMEOUT 120 PASS "comm-mpi-p2p: rank 0: PASS" COMMAND comm-mpi-p2p)
endforeach()

# A program that owns MPI: comm over MPI_COMM_WORLD and over MPI_Comm_split halves.
foreach(level multiple funneled)
  comm_mpi_test(NAME mp_mpi_embed_${level}_4 RANKS 4 TIMEOUT 120 COMMAND comm-mpi-embed ${level})
endforeach()

# Rank 1 freezes: rank 0 times out naming it (ring), or with MPI's collectives
# polled (native + poll); a blocking MPI_Allreduce is ended by the watchdog.
comm_mpi_test(NAME mp_mpi_timeout_ring RANKS 2 TIMEOUT 60 ENV COMM_TIMEOUT=2
  PASS "rank 0: PASS" COMMAND comm-mpi-timeout ring)
comm_mpi_test(NAME mp_mpi_timeout_native_poll RANKS 2 TIMEOUT 60 ENV COMM_TIMEOUT=2 COMM_MPI_NATIVE=poll
  PASS "rank 0: PASS" COMMAND comm-mpi-timeout native)
comm_mpi_test(NAME mp_mpi_timeout_native_block RANKS 2 TIMEOUT 60 ENV COMM_TIMEOUT=2
  PASS "rank 0: mpi allreduce #[0-9]+ \\([0-9]+ B\\) has not returned after [0-9.]+ s" COMMAND comm-mpi-timeout native)

# A rank SIGKILLed mid-collective: Open MPI's mpirun ends the whole job at once
# (the survivors never see an error of ours) and names the rank; nothing hangs.
if(COMM_MPIRUN_ARGS)
  comm_mpi_test(NAME mp_mpi_fault_kill_3 RANKS 3 TIMEOUT 60
    PASS "process rank 1 with PID [0-9]+ on node [^ ]+ exited on signal 9"
    COMMAND comm-mp-suite --kill-rank 1 --kill-after 5)
endif()

# The main job's shape, small: every transport under mpirun (COMM_STORE=mpi),
# results checked, ending with the per-size comparison against MPI's native.
comm_mpi_test(NAME mp_mpi_bench_all_2 RANKS 2 TIMEOUT 240 ENV COMM_STORE=mpi UCX_NET_DEVICES=lo FI_TCP_IFACE=lo
  PASS "comparison \\(allreduce, 2 ranks\\)[^\n]*native on [a-z, ]*mpi.*\n +4096 [^\n]*\n# wrong elements: 0 OK"
  COMMAND comm-bench --coll allreduce --transport all --algo all -b 8 -e 4K -f 8 -n 10 -w 2 -c 1 --quiet)
