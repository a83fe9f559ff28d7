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

# comm_add_script_test(NAME <name> LABELS <label>... TIMEOUT <seconds>
#                      [ENV <VAR=VALUE>...] DEFINES <VAR=VALUE>...)
# adds a ctest that runs the calling file as the test:
# `cmake -D<VAR=VALUE>... -P <calling file>`, with that environment.
function(comm_add_script_test)
  cmake_parse_arguments(PARSE_ARGV 0 T "" "NAME;TIMEOUT" "LABELS;ENV;DEFINES")
  if(NOT T_NAME OR NOT T_TIMEOUT OR NOT T_DEFINES)
    message(FATAL_ERROR "comm_add_script_test: NAME, TIMEOUT and DEFINES are required")
  endif()
  set(defines "")
  foreach(d IN LISTS T_DEFINES)
    list(APPEND defines "-D${d}")
  endforeach()
  add_test(NAME ${T_NAME} COMMAND ${CMAKE_COMMAND} ${defines} -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} ENVIRONMENT "${T_ENV}")
endfunction()
