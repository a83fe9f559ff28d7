# Deterministic mode over every real transport of this build (labels mp and
# the transport): bitwise-identical all-reduce results, 2 and 3 ranks.
add_executable(comm-mp-deterministic ${CMAKE_CURRENT_LIST_DIR}/deterministic.cpp)
target_link_libraries(comm-mp-deterministic PRIVATE comm::comm)
target_include_directories(comm-mp-deterministic PRIVATE ${PROJECT_SOURCE_DIR})
comm_set_warnings(comm-mp-deterministic)

set(COMM_DET_ENV_ucx_shm COMM_TRANSPORT=ucx UCX_TLS=shm)
set(COMM_DET_ENV_ucx_tcp COMM_TRANSPORT=ucx UCX_TLS=tcp UCX_NET_DEVICES=lo)
set(COMM_DET_ENV_ofi_shm COMM_TRANSPORT=ofi FI_PROVIDER=shm COMM_OFI_PROVIDER=shm)
set(COMM_DET_ENV_ofi_tcp COMM_TRANSPORT=ofi "FI_PROVIDER=tcp\;ofi_rxm" "COMM_OFI_PROVIDER=tcp\;ofi_rxm"
    FI_TCP_IFACE=lo FI_NET_IFACE=lo)
set(COMM_DET_ENV_gloo_tcp COMM_TRANSPORT=gloo COMM_IFACE=127.0.0.1)
set(COMM_DET_ENV_shm_shm COMM_TRANSPORT=shm)
foreach(variant ucx_shm ucx_tcp ofi_shm ofi_tcp gloo_tcp shm_shm)
  string(REGEX REPLACE "_.*" "" t ${variant})
  if(NOT t IN_LIST COMM_ENABLED_TRANSPORTS)
    continue()
  endif()
  foreach(n 2 3)
    comm_mp_test(NAME mp_deterministic_${variant}_${n} RANKS ${n} LABELS mp ${t} TIMEOUT 120
      ENV ${COMM_DET_ENV_${variant}} COMMAND comm-mp-deterministic)
    set_tests_properties(mp_deterministic_${variant}_${n} PROPERTIES
      PASS_REGULAR_EXPRESSION "all-reduces bitwise equal to the rank-ordered fold")
  endforeach()
endforeach()
