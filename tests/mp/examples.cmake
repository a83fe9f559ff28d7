# The examples as tests (label `examples`, plus the transport each run uses).
# Each example runs on 2 ranks over UCX shared memory with small parameters and
# its output is checked; swap_transports must print the same checksums under
# every enabled transport; shard_planner's predictions must grow with the TP
# degree where latency dominates, and its nvswitch preset must land within
# 30 % of NCCL's published small-message latency.
if(NOT COMM_BUILD_EXAMPLES)
  return()
endif()

# A run fails on a failed rank or a wrong result whatever else it printed
# (PASS_REGULAR_EXPRESSION alone would ignore the exit code).
set(COMM_EXAMPLE_FAIL "commrun: job failed|WRONG|NO \\(|OUTSIDE|terminate called")
set(COMM_EXAMPLE_LOOPBACK UCX_NET_DEVICES=lo FI_TCP_IFACE=lo FI_NET_IFACE=lo)

function(comm_example_check name pass)
  set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "${pass}"
                                          FAIL_REGULAR_EXPRESSION "${COMM_EXAMPLE_FAIL}")
endfunction()

if("ucx" IN_LIST COMM_ENABLED_TRANSPORTS)
  set(ucx_env COMM_TRANSPORT=ucx UCX_TLS=shm ${COMM_EXAMPLE_LOOPBACK})
  comm_mp_test(NAME examples_embed_minimal_ucx RANKS 2 LABELS examples ucx TIMEOUT 60
    ENV ${ucx_env} COMMAND embed_minimal)
  comm_example_check(examples_embed_minimal_ucx "rank 1 of 2: x\\[0\\] = 3 \\(ok\\)")
  comm_mp_test(NAME examples_embed_minimal_c_ucx RANKS 2 LABELS examples ucx c TIMEOUT 60
    ENV ${ucx_env} COMMAND embed_minimal_c)
  comm_example_check(examples_embed_minimal_c_ucx "rank 1 of 2: x\\[0\\] = 3 \\(ok\\)")

  comm_mp_test(NAME examples_tp_decode_ucx RANKS 2 LABELS examples ucx TIMEOUT 120
    ENV ${ucx_env}
    COMMAND tp_decode --layers 2 --hidden 256 --batch 2 --tokens 6 --warmup 1 --overlap --slices 2)
  comm_example_check(examples_tp_decode_ucx
    "algorithm per message size.*blocking: +token latency median.*overlapped: .*overlap hid .*ranks agree on the output: yes")
  # A forced algorithm and f32: the override reaches every call and the ranks still agree.
  comm_mp_test(NAME examples_tp_decode_ring_f32_ucx RANKS 2 LABELS examples ucx TIMEOUT 120
    ENV ${ucx_env}
    COMMAND tp_decode --layers 2 --hidden 128 --tokens 4 --warmup 1 --dtype f32 --algo ring)
  comm_example_check(examples_tp_decode_ring_f32_ucx "overridden by --algo.*ranks agree on the output: yes")

  comm_mp_test(NAME examples_swap_transports_ucx RANKS 2 LABELS examples ucx TIMEOUT 60
    ENV ${ucx_env} COMMAND swap_transports --count 333)
  comm_example_check(examples_swap_transports_ucx "results match the independently computed values: yes")

  comm_mp_test(NAME examples_shard_planner_calibrated_ucx RANKS 2 LABELS examples ucx TIMEOUT 120
    ENV ${ucx_env} COMMAND shard_planner --calibrated --layers 2 --hidden 1024 --batch 1)
  comm_example_check(examples_shard_planner_calibrated_ucx "fabric: calibrated.*\n[^\n]* 16  [a-z_]+ +[0-9.]+")
else()
  add_test(NAME examples_ucx_skipped
    COMMAND sh -c "echo 'SKIPPED: the 2-rank example runs need the ucx transport (install libucx-dev and reconfigure)'; exit 77")
  set_tests_properties(examples_ucx_skipped PROPERTIES LABELS "examples;ucx" SKIP_RETURN_CODE 77)
endif()

# Same checksums under every enabled transport: local (threads), ucx, ofi, gloo.
set(checksum_transports local)
set(checksum_labels examples local)
foreach(t ucx ofi gloo)
  if(t IN_LIST COMM_ENABLED_TRANSPORTS)
    list(APPEND checksum_transports ${t})
    list(APPEND checksum_labels ${t})
  endif()
endforeach()
string(REPLACE ";" "," checksum_transports "${checksum_transports}")
add_test(NAME examples_swap_transports_checksums
  COMMAND ${CMAKE_COMMAND} -DCOMMRUN=$<TARGET_FILE:commrun> -DPROGRAM=$<TARGET_FILE:swap_transports>
          -DTRANSPORTS=${checksum_transports} -P ${CMAKE_CURRENT_LIST_DIR}/examples_checksums.cmake)
set_tests_properties(examples_swap_transports_checksums PROPERTIES LABELS "${checksum_labels}" TIMEOUT 240
  ENVIRONMENT "UCX_TLS=shm;UCX_NET_DEVICES=lo;FI_TCP_IFACE=lo;FI_NET_IFACE=lo;COMM_CALIBRATE=0")

# The planner needs no communicator for its presets.
add_test(NAME examples_shard_planner_nvswitch_reference COMMAND shard_planner --fabric nvswitch)
set_tests_properties(examples_shard_planner_nvswitch_reference PROPERTIES LABELS examples TIMEOUT 60)
comm_example_check(examples_shard_planner_nvswitch_reference
  "source: alpha: NCCL.*reference check: h100-8, 8.0 KiB all-reduce, 'ring': [^\n]*within 30 %")
# Hosts of 8 GPUs: hierarchical vs flat ring, the selector never slower than
# either, and every published figure of the preset within 30 % (exit code 0).
foreach(preset h100-2x8 h100-8x8)
  add_test(NAME examples_shard_planner_compare_${preset} COMMAND shard_planner --compare --fabric ${preset})
  set_tests_properties(examples_shard_planner_compare_${preset} PROPERTIES LABELS examples TIMEOUT 120)
endforeach()
comm_example_check(examples_shard_planner_compare_h100-2x8
  "1.0 GiB +[0-9.]+ +[0-9.]+ +[0-9.]+  hierarchical_rail.*reference check: h100-2x8, 1.0 GiB[^\n]*within 30 %")
add_test(NAME examples_shard_planner_monotone
  COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:shard_planner> -P ${CMAKE_CURRENT_LIST_DIR}/examples_planner.cmake)
set_tests_properties(examples_shard_planner_monotone PROPERTIES LABELS examples TIMEOUT 120)
