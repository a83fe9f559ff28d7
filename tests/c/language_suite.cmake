# Shared by the C API and Python tests: one suite program on 2 and 3 processes
# over each multi-process host transport built here, loopback only.
#
# comm_language_suite(PREFIX <name> LABEL <label> [ENV <VAR=VALUE>...] COMMAND <program> <args>...)
# adds <name>_<transport>_<n> under commrun (or <name>_mp_skipped, exit 77,
# when no such transport is built) and sets, in the caller's scope,
# COMM_SUITE_TRANSPORTS (the transports used) and COMM_SUITE_ENV_<transport>.
set(COMM_SUITE_ENV_ucx COMM_TRANSPORT=ucx UCX_TLS=shm UCX_NET_DEVICES=lo)
set(COMM_SUITE_ENV_ofi COMM_TRANSPORT=ofi "FI_PROVIDER=tcp\;ofi_rxm" "COMM_OFI_PROVIDER=tcp\;ofi_rxm" FI_TCP_IFACE=lo)
set(COMM_SUITE_ENV_gloo COMM_TRANSPORT=gloo)

function(comm_language_suite)
  cmake_parse_arguments(PARSE_ARGV 0 S "" "PREFIX;LABEL" "ENV;COMMAND")
  set(used "")
  foreach(t ucx ofi gloo)
    if(t IN_LIST COMM_ENABLED_TRANSPORTS)
      list(APPEND used ${t})
      foreach(n 2 3)
        comm_mp_test(NAME ${S_PREFIX}_${t}_${n} RANKS ${n} LABELS ${S_LABEL} mp ${t} TIMEOUT 180
          ENV ${S_ENV} ${COMM_SUITE_ENV_${t}} COMMAND ${S_COMMAND})
      endforeach()
    endif()
  endforeach()
  if(NOT used)
    add_test(NAME ${S_PREFIX}_mp_skipped
      COMMAND sh -c "echo 'SKIPPED: the multi-process ${S_LABEL} suite needs ucx, ofi or gloo (install libucx-dev, libfabric-dev or libgloo-dev and reconfigure)'; exit 77")
    set_tests_properties(${S_PREFIX}_mp_skipped PROPERTIES LABELS "${S_LABEL};mp" SKIP_RETURN_CODE 77)
  endif()
  set(COMM_SUITE_TRANSPORTS ${used} PARENT_SCOPE)
endfunction()
