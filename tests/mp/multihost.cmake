# Tests across emulated hosts (label `multihost`): tools/multihost.sh puts each
# host in its own network, UTS, IPC and mount namespaces, so they need root and
# namespaces (CI runs as root); elsewhere the rig exits 77 and they are skipped.
# Every test checks afterwards that no namespace of it is left
# (tests/mp/multihost_test.sh).
#
#  - the collective suite (--quick) on 2 hosts x 2 ranks and on 3 hosts of
#    2, 1, 1 ranks over auto (the default: no transport named), ucx, ofi, gloo,
#    and auto composed of two transports (ucx inside hosts, gloo between);
#  - comm-mh-check: hierarchical results bit-identical to the flat algorithms',
#    and the bytes sent across hosts (byte counters) within the split-rail bound;
#  - a rank killed on one host: the ranks of both hosts fail naming it (ucx, auto);
#  - a Slurm job step without COMM_STORE finds its store on the first node;
#  - the rig's cleanup after a failure, SIGTERM and SIGKILL.

comm_mp_program(comm-mh-check ${CMAKE_CURRENT_LIST_DIR}/multihost_check.cpp)

set(COMM_MH_RIG ${PROJECT_SOURCE_DIR}/tools/multihost.sh)
set(COMM_MH_TEST sh ${CMAKE_CURRENT_LIST_DIR}/multihost_test.sh ${COMM_MH_RIG})

# comm_mh_test(NAME <name> LAYOUT <r,r,...> [TIMEOUT s] [ENV VAR=VALUE...] [RIG_ARGS ...] COMMAND prog args...)
function(comm_mh_test)
  cmake_parse_arguments(PARSE_ARGV 0 T "" "NAME;LAYOUT;TIMEOUT" "ENV;RIG_ARGS;COMMAND")
  comm_test_job(180 30)
  set(env_args "")
  foreach(e IN LISTS T_ENV)
    list(APPEND env_args --env ${e})
  endforeach()
  add_test(NAME ${T_NAME}
    COMMAND ${COMM_MH_TEST} run ${T_NAME} --commrun $<TARGET_FILE:commrun> --layout ${T_LAYOUT}
            --timeout ${job_timeout} ${env_args} ${T_RIG_ARGS} -- ${program} ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES LABELS multihost TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77
    RESOURCE_LOCK multihost_cpu)
endfunction()

set(mh_transports auto)
foreach(t ucx ofi gloo)
  if(t IN_LIST COMM_ENABLED_TRANSPORTS)
    list(APPEND mh_transports ${t})
  endif()
endforeach()
# The environment naming transport t (auto: none, it is the default).
function(mh_transport_env t out)
  if(t STREQUAL "auto")
    set(${out} "" PARENT_SCOPE)
  else()
    set(${out} COMM_TRANSPORT=${t} PARENT_SCOPE)
  endif()
endfunction()

foreach(t IN LISTS mh_transports)
  mh_transport_env(${t} env)
  comm_mh_test(NAME mh_suite_${t}_2x2 LAYOUT 2,2 ENV ${env} COMMAND comm-mp-suite --quick)
  comm_mh_test(NAME mh_suite_${t}_211 LAYOUT 2,1,1 ENV ${env} COMMAND comm-mp-suite --quick)
endforeach()
if("ucx" IN_LIST COMM_ENABLED_TRANSPORTS AND "gloo" IN_LIST COMM_ENABLED_TRANSPORTS)
  comm_mh_test(NAME mh_suite_auto_mixed_2x2 LAYOUT 2,2 ENV COMM_AUTO_INTRA=ucx COMM_AUTO_INTER=gloo
    COMMAND comm-mp-suite --quick)
endif()
comm_mh_test(NAME mh_check_2x2 LAYOUT 2,2 COMMAND comm-mh-check)
comm_mh_test(NAME mh_check_211 LAYOUT 2,1,1 COMMAND comm-mh-check)

# Rank 3 (on host 1) dies inside its 5th all-reduce; the ranks of both hosts
# must fail naming it within 10 s. Over UCX (and auto, whose inter-host UCX
# spans the group) every survivor learns of the death, through its own
# endpoint or an obituary. Over ofi and gloo only the ranks that talk to the
# dead one name it; the others see the survivors that leave (their failure
# detection across hosts is the failure-handling work of issue 13), so they
# are not tested here.
set(mh_kill_transports auto)
if("ucx" IN_LIST COMM_ENABLED_TRANSPORTS)
  list(APPEND mh_kill_transports ucx)
endif()
foreach(t IN LISTS mh_kill_transports)
  mh_transport_env(${t} env)
  comm_mh_test(NAME mh_kill_${t}_2x2 LAYOUT 2,2 TIMEOUT 120 ENV ${env} RIG_ARGS --allow-fail 3
    COMMAND comm-mp-suite --kill-rank 3 --kill-after 5)
endforeach()

# Slurm: the rig starts the ranks itself with only Slurm's variables.
if(TARGET embed_minimal)
  comm_mh_test(NAME mh_slurm_store_21 LAYOUT 2,1 TIMEOUT 120
    ENV SLURM_JOB_ID=4242 SLURM_STEP_NODELIST=mh-h[0-1]
    RIG_ARGS --launcher env
    COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/multihost_slurm_rank.sh $<TARGET_FILE:embed_minimal>)
  set_tests_properties(mh_slurm_store_21 PROPERTIES PASS_REGULAR_EXPRESSION "rank 2 of 3: x\\[0\\] = 6 \\(ok\\)")
endif()

add_test(NAME mh_rig_cleanup COMMAND ${COMM_MH_TEST} cleanup mh_rig_cleanup $<TARGET_FILE:commrun>)
set_tests_properties(mh_rig_cleanup PROPERTIES LABELS multihost TIMEOUT 120 SKIP_RETURN_CODE 77
  RESOURCE_LOCK multihost_cpu)
