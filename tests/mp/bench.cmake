# comm-bench smoke tests: every all-reduce algorithm side by side from 8 B to
# 64 KiB on 2 ranks, results checked (-c 1), over each transport of this build
# (label = the transport name, plus mp and bench). The test then reads the
# --json file back and asserts that it parses, that every record has zero
# wrong elements and a positive time, and that every algorithm and auto ran
# at every size.
#
# This file has two modes: included from tests/mp/CMakeLists.txt it registers
# the tests; run as `cmake -P bench.cmake -D...` it is the test itself.

include(${CMAKE_CURRENT_LIST_DIR}/script_test.cmake)

if(CMAKE_SCRIPT_MODE_FILE)
  comm_script_require(COMMRUN BENCH TRANSPORT JSON)
  file(REMOVE "${JSON}")
  execute_process(
    COMMAND "${COMMRUN}" -n 2 --timeout 230 -- "${BENCH}" --transport ${TRANSPORT} --coll allreduce --algo all
            -b 8 -e 64K -f 4 -n 10 -w 2 -c 1 --quiet --json "${JSON}"
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "comm-bench on ${TRANSPORT} exited with ${rc} (1 = wrong elements or a failed transport)")
  endif()
  file(READ "${JSON}" text)
  string(JSON records ERROR_VARIABLE err GET "${text}" records)
  if(err)
    message(FATAL_ERROR "${JSON} does not parse as comm-bench JSON: ${err}")
  endif()
  string(JSON n LENGTH "${text}" records)
  if(n EQUAL 0)
    message(FATAL_ERROR "${JSON} has no records")
  endif()
  set(sizes "")
  set(algos "")
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    string(JSON wrong GET "${text}" records ${i} wrong)
    string(JSON time GET "${text}" records ${i} time_us)
    string(JSON algo GET "${text}" records ${i} algo)
    string(JSON bytes GET "${text}" records ${i} bytes)
    string(JSON pick GET "${text}" records ${i} auto_pick)
    string(JSON transport GET "${text}" records ${i} transport)
    if(NOT wrong EQUAL 0)
      message(FATAL_ERROR "record ${i} (${algo}, ${bytes} B): ${wrong} wrong elements")
    endif()
    if(NOT time GREATER 0)
      message(FATAL_ERROR "record ${i} (${algo}, ${bytes} B): time_us ${time} is not positive")
    endif()
    if(pick STREQUAL "" OR pick STREQUAL "NOTFOUND")
      message(FATAL_ERROR "record ${i} (${algo}, ${bytes} B): auto_pick missing")
    endif()
    if(NOT transport STREQUAL TRANSPORT)
      message(FATAL_ERROR "record ${i}: transport '${transport}', expected '${TRANSPORT}'")
    endif()
    list(APPEND sizes ${bytes})
    list(APPEND algos ${algo})
  endforeach()
  list(REMOVE_DUPLICATES sizes)
  list(REMOVE_DUPLICATES algos)
  list(LENGTH sizes nsizes)
  list(LENGTH algos nalgos)
  # 8, 32, 128, 512, 2K, 8K, 32K and the end point 64K.
  if(NOT nsizes EQUAL 8)
    message(FATAL_ERROR "expected 8 sizes from 8 B to 64 KiB, found ${nsizes}: ${sizes}")
  endif()
  if(NOT "auto" IN_LIST algos OR nalgos LESS 3)
    message(FATAL_ERROR "expected every algorithm plus auto, found: ${algos}")
  endif()
  math(EXPR expected "${nsizes} * ${nalgos}")
  if(NOT n EQUAL expected)
    message(FATAL_ERROR "expected ${expected} records (${nsizes} sizes x ${nalgos} algorithms), found ${n}")
  endif()
  message(STATUS "comm-bench ${TRANSPORT}: ${n} records, ${nalgos} algorithms (${algos}), 0 wrong")
  return()
endif()

comm_script_tests_need(comm-bench)
foreach(variant ucx_shm ucx_tcp ofi_shm ofi_tcp gloo_tcp)
  string(REGEX REPLACE "_.*" "" t ${variant})
  string(TOUPPER ${t} T)
  if(NOT COMM_HAVE_${T})
    continue()
  endif()
  comm_add_script_test(NAME mp_bench_${variant} LABELS mp bench ${t} TIMEOUT 240
    ENV ${COMM_TEST_ENV_${variant}} COMM_CALIBRATE=0
    DEFINES COMMRUN=$<TARGET_FILE:commrun> BENCH=$<TARGET_FILE:comm-bench> TRANSPORT=${t}
            JSON=${CMAKE_CURRENT_BINARY_DIR}/bench_${variant}.json)
endforeach()

# nccl-tests' layout (a single algorithm): both column groups on every row
# (8 B ... 64 KiB, each with its #wrong of 0 after 2 checked runs), the
# footers, no [rN] prefix (commrun --no-prefix). (CMake regexes have no {n}.)
foreach(t ucx gloo)
  if(NOT t IN_LIST COMM_ENABLED_TRANSPORTS)
    continue()
  endif()
  comm_mp_test(NAME mp_bench_nccl_format_${t} RANKS 2 LABELS mp bench ${t} TIMEOUT 120
    ENV COMM_IFACE=127.0.0.1 UCX_TLS=shm COMMRUN_ARGS --no-prefix
    COMMAND comm-bench --transport ${t} -t 1 -g 1 -b 8 -e 64K -f 8 -n 5 -w 1 -m 2 -c 2 -a 1 --quiet)
  set_tests_properties(mp_bench_nccl_format_${t} PROPERTIES PASS_REGULAR_EXPRESSION
    "#  Rank  1 Group  0 Pid[^\n]*\n#\n#[ ]+out-of-place[ ]+in-place\n.*\n           8 +2 +float +sum +-1( +[0-9.]+ +[0-9.]+ +[0-9.]+ +0)( +[0-9.]+ +[0-9.]+ +[0-9.]+ +0)\n.*\n       65536 +16384 +float +sum +-1( +[0-9.]+ +[0-9.]+ +[0-9.]+ +0)( +[0-9.]+ +[0-9.]+ +[0-9.]+ +0)\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : [0-9.e+]+ \n")
endforeach()
