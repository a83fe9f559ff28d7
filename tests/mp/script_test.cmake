# Helpers of the tests that are CMake scripts (bench.cmake, calibration.cmake,
# info.cmake). Each such file has two modes: included from
# tests/mp/CMakeLists.txt it registers its tests with comm_add_script_test;
# run as `cmake -D... -P <file>` it is the test, and first checks its inputs
# with comm_script_require. This file is included in both modes.

# comm_script_require(<VAR>...): in script mode, stops the script naming the
# first -D<VAR>=... its command line lacks.
function(comm_script_require)
  get_filename_component(script "${CMAKE_SCRIPT_MODE_FILE}" NAME)
  foreach(var IN LISTS ARGN)
    if(NOT DEFINED ${var})
      message(FATAL_ERROR "${script}: -D${var}=... is required")
    endif()
  endforeach()
endfunction()

# comm_script_run(<what> <out-var> <err-var> <command>...): runs the command
# and stores what it printed on stdout and stderr; stops the script, naming
# <what> and showing both, when it exits non-zero.
function(comm_script_run what out_var err_var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} exited with ${rc}:\n${out}\n${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
  set(${err_var} "${err}" PARENT_SCOPE)
endfunction()

# comm_add_script_test(NAME <name> LABELS <label>... TIMEOUT <seconds>
#                      [ENV <VAR=VALUE>...] DEFINES <VAR=VALUE>...)
# adds a ctest that runs the calling file as the test (configure mode only:
# comm_test_args comes from tests/mp/CMakeLists.txt):
# `cmake -D<VAR=VALUE>... -P <calling file>`, with that environment.
function(comm_add_script_test)
  comm_test_args(comm_add_script_test "NAME;TIMEOUT" "LABELS;ENV;DEFINES" NAME TIMEOUT DEFINES)
  set(defines "")
  foreach(d IN LISTS T_DEFINES)
    list(APPEND defines "-D${d}")
  endforeach()
  add_test(NAME ${T_NAME} COMMAND ${CMAKE_COMMAND} ${defines} -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} ENVIRONMENT "${T_ENV}")
endfunction()

# comm_script_tests_need(<target>): in configure mode, stops reading the calling
# file when <target> is not built (a macro, so its return() leaves the caller).
macro(comm_script_tests_need target)
  if(NOT TARGET ${target})
    return()
  endif()
endmacro()

# The environment each script test runs a transport under on this one host:
# <transport>_shm through shared memory, <transport>_tcp through loopback.
set(COMM_TEST_ENV_ucx_shm UCX_TLS=shm)
set(COMM_TEST_ENV_ucx_tcp UCX_TLS=tcp UCX_NET_DEVICES=lo)
set(COMM_TEST_ENV_ofi_shm FI_PROVIDER=shm COMM_OFI_PROVIDER=shm)
set(COMM_TEST_ENV_ofi_tcp "FI_PROVIDER=tcp\;ofi_rxm" "COMM_OFI_PROVIDER=tcp\;ofi_rxm" FI_TCP_IFACE=lo FI_NET_IFACE=lo)
set(COMM_TEST_ENV_gloo_tcp COMM_IFACE=127.0.0.1)
