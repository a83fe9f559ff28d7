# Start-up calibration across real processes, per transport (labels mp and
# the transport): the first 2-rank job measures its setup and writes one
# tuning file into a fresh cache directory; a second job of the same setup
# checks it and reuses it without measuring (or, when the check timed it
# under half its cached time, says so and measures again); a cache whose
# measured times were made a thousand times slower is measured again and
# replaced (ten times was not enough on a loaded CI machine, where four
# ranks share two cores);
# with COMM_CALIBRATE=0 nothing is read or written. On gloo the file must also
# hold the measured curves of Gloo's own all-reduce, and comm-bench's pred_us
# for `native` must come from them.
#
# Two modes, like bench.cmake: included, it registers the tests; run with
# `cmake -P`, it is the test.

include(${CMAKE_CURRENT_LIST_DIR}/script_test.cmake)

# Every measured point of comm's all-reduce algorithms in the tuning file
# `text`, as "name|index|bytes|us" entries of the list `out`.
function(measured_points text out)
  set(points "")
  string(JSON ncurves LENGTH "${text}" measured allreduce)
  math(EXPR last_curve "${ncurves} - 1")
  foreach(c RANGE ${last_curve})
    string(JSON name MEMBER "${text}" measured allreduce ${c})
    string(JSON npoints LENGTH "${text}" measured allreduce ${name})
    math(EXPR last_point "${npoints} - 1")
    foreach(i RANGE ${last_point})
      string(JSON bytes GET "${text}" measured allreduce ${name} ${i} 0)
      string(JSON us GET "${text}" measured allreduce ${name} ${i} 1)
      list(APPEND points "${name}|${i}|${bytes}|${us}")
    endforeach()
  endforeach()
  set(${out} "${points}" PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE)
  comm_script_require(COMMRUN BENCH TRANSPORT CACHE)
  file(REMOVE_RECURSE "${CACHE}")
  set(ENV{XDG_CACHE_HOME} "${CACHE}")
  set(ENV{COMM_LOG} info)
  set(ENV{COMM_CALIBRATE} 1)
  # CI machines are busy: these jobs must cache whatever else runs (the busy
  # host's own test is calibration_busy_test.sh).
  set(ENV{COMM_CALIBRATION_BUSY_LIMIT} 1)
  set(run "${COMMRUN}" -n 2 --timeout 100 -- "${BENCH}" --transport ${TRANSPORT} --algo all -b 64K -e 64K -n 3 -w 1
          --quiet)
  comm_script_run("the first job" out1 err1 ${run})
  if(NOT err1 MATCHES "tuning: calibrated at creation \\(([0-9.]+) ms\\), saved to ${CACHE}/comm/tuning-[0-9a-f]+\\.json")
    message(FATAL_ERROR "the first job did not calibrate and cache:\n${err1}")
  endif()
  set(ms ${CMAKE_MATCH_1})
  file(GLOB files "${CACHE}/comm/tuning-*.json")
  list(LENGTH files nfiles)
  if(NOT nfiles EQUAL 1)
    message(FATAL_ERROR "expected one tuning file in ${CACHE}/comm, found ${nfiles}: ${files}")
  endif()
  file(READ "${files}" text)
  string(JSON version GET "${text}" comm_tuning_version)
  string(JSON id GET "${text}" key id)
  if(NOT version EQUAL 5 OR NOT files MATCHES "tuning-${id}\\.json$")
    message(FATAL_ERROR "the tuning file is not version 5 named by its key id:\n${text}")
  endif()
  # Every link kind measured carries its transfer curve: the calibration
  # ladder's sizes from 8 B to 1 MiB, times that never decrease.
  string(JSON nkinds LENGTH "${text}" links)
  math(EXPR last_kind "${nkinds} - 1")
  foreach(k RANGE ${last_kind})
    string(JSON kind MEMBER "${text}" links ${k})
    string(JSON npoints ERROR_VARIABLE no_curve LENGTH "${text}" links ${kind} transfer_us)
    if(no_curve OR NOT npoints EQUAL 12)
      message(FATAL_ERROR "link ${kind} has no transfer curve of the 12 ladder sizes:\n${text}")
    endif()
    string(JSON first GET "${text}" links ${kind} transfer_us 0 0)
    string(JSON last GET "${text}" links ${kind} transfer_us 11 0)
    if(NOT first EQUAL 8 OR NOT last EQUAL 1048576)
      message(FATAL_ERROR "link ${kind}'s transfer curve runs from ${first} to ${last} B, not 8 B to 1 MiB:\n${text}")
    endif()
    set(previous 0)
    foreach(i RANGE 11)
      string(JSON us GET "${text}" links ${kind} transfer_us ${i} 1)
      if(us LESS previous)
        message(FATAL_ERROR "link ${kind}'s transfer curve decreases at point ${i} (${us} us after ${previous}):\n${text}")
      endif()
      set(previous ${us})
    endforeach()
  endforeach()
  # comm's own all-reduce algorithms were timed at creation: at every size of
  # the ladder in cache at least two of them (select/timing_plan.hpp
  # kMinCandidatesInCache: however little of its budget is left on a busy
  # machine, calibration never leaves those sizes out), each point a positive time.
  string(JSON algorithms ERROR_VARIABLE no_measured LENGTH "${text}" measured allreduce)
  if(no_measured OR algorithms LESS 2)
    message(FATAL_ERROR "no measured curves of comm's own all-reduce algorithms in the tuning file:\n${text}")
  endif()
  foreach(size 8 4096 65536 1048576)
    set(timed_at_${size} 0)
  endforeach()
  measured_points("${text}" points)
  foreach(point IN LISTS points)
    string(REPLACE "|" ";" fields "${point}")
    list(GET fields 0 name)
    list(GET fields 1 i)
    list(GET fields 2 bytes)
    list(GET fields 3 us)
    if(NOT us GREATER 0)
      message(FATAL_ERROR "measured ${name} point ${i} is ${us} us, not a positive time:\n${text}")
    endif()
    if(DEFINED timed_at_${bytes})
      math(EXPR timed_at_${bytes} "${timed_at_${bytes}} + 1")
    endif()
  endforeach()
  foreach(size 8 4096 65536 1048576)
    if(timed_at_${size} LESS 2)
      message(FATAL_ERROR "${timed_at_${size}} of comm's algorithms measured at ${size} B, not at least 2:\n${text}")
    endif()
  endforeach()
  if(TRANSPORT STREQUAL "gloo")
    string(JSON native_points ERROR_VARIABLE no_native LENGTH "${text}" native allreduce native)
    if(no_native OR native_points LESS 3)
      message(FATAL_ERROR "no measured curve of Gloo's own all-reduce in the tuning file:\n${text}")
    endif()
    # comm-bench's native row must carry a prediction (pred_us not '-').
    if(NOT out1 MATCHES "\\[r0\\] +65536 +16384 +f32 +sum +- +native +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 +[0-9.]+")
      message(FATAL_ERROR "the native algorithm has no prediction after calibration:\n${out1}")
    endif()
  endif()

  set(remeasured "calibration: the cached tuning ${CACHE}/comm/tuning-${id}\\.json was measured in a slow spell \\([a-z_]+ at [0-9]+ B took [0-9.]+ us now against [0-9.]+ us cached\\); calibrating again")
  set(replaced "tuning: calibrated at creation \\([0-9.]+ ms\\), replacing a cache measured in a slow spell \\(.*\\), saved to ${CACHE}/comm/tuning-${id}\\.json")
  execute_process(COMMAND ${run} RESULT_VARIABLE rc OUTPUT_VARIABLE out2 ERROR_VARIABLE err2)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the second job failed (${rc}):\n${err2}")
  elseif(err2 MATCHES "${remeasured}")
    # The first job met a slow spell the check saw: measured again, replaced.
    if(NOT err2 MATCHES "${replaced}")
      message(FATAL_ERROR "the second job found the cache stale but did not replace it:\n${err2}")
    endif()
    set(second "measured again (the first job's figures were slow)")
  elseif(NOT err2 MATCHES "tuning: tuning cache ${CACHE}/comm/tuning-${id}\\.json" OR err2 MATCHES "calibration:")
    message(FATAL_ERROR "the second job neither reused the cached figures nor said why it measured again:\n${err2}")
  else()
    set(second "reused")
  endif()

  # A cache a thousand times slower than this machine: the check must see it.
  file(READ "${files}" text)
  measured_points("${text}" points)
  foreach(point IN LISTS points)
    string(REPLACE "|" ";" fields "${point}")
    list(GET fields 0 name)
    list(GET fields 1 i)
    list(GET fields 3 us)
    string(REGEX REPLACE "\\..*$" "" whole "${us}")  # CMake's math is integer only
    math(EXPR slow "${whole} * 1000 + 10")
    string(JSON text SET "${text}" measured allreduce ${name} ${i} 1 ${slow})
  endforeach()
  file(WRITE "${files}" "${text}")
  execute_process(COMMAND ${run} RESULT_VARIABLE rc OUTPUT_VARIABLE out4 ERROR_VARIABLE err4)
  if(NOT rc EQUAL 0 OR NOT err4 MATCHES "${remeasured}" OR NOT err4 MATCHES "${replaced}")
    message(FATAL_ERROR "a cache a thousand times slower than now was not measured again and replaced (${rc}):\n${err4}")
  endif()

  set(ENV{COMM_CALIBRATE} 0)
  file(REMOVE_RECURSE "${CACHE}")
  execute_process(COMMAND ${run} RESULT_VARIABLE rc OUTPUT_VARIABLE out3 ERROR_VARIABLE err3)
  if(NOT rc EQUAL 0 OR NOT err3 MATCHES "nominal figures \\(calibration off\\)" OR EXISTS "${CACHE}/comm")
    message(FATAL_ERROR "COMM_CALIBRATE=0 still calibrated or cached (${rc}):\n${err3}")
  endif()
  message(STATUS "calibration on ${TRANSPORT}: measured in ${ms} ms, cached as tuning-${id}.json; second job: ${second}; a thousandfold slower cache was replaced")
  file(REMOVE_RECURSE "${CACHE}")
  return()
endif()

comm_script_tests_need(comm-bench)
foreach(variant ucx_shm ofi_shm gloo_tcp)
  string(REGEX REPLACE "_.*" "" t ${variant})
  if(NOT t IN_LIST COMM_ENABLED_TRANSPORTS)
    continue()
  endif()
  comm_add_script_test(NAME mp_calibration_cached_${t} LABELS mp ${t} TIMEOUT 120 ENV ${COMM_TEST_ENV_${variant}}
    DEFINES COMMRUN=$<TARGET_FILE:commrun> BENCH=$<TARGET_FILE:comm-bench> TRANSPORT=${t}
            CACHE=${CMAKE_CURRENT_BINARY_DIR}/calibration-cache-${t})
endforeach()

# Calibrating on a busy host: used, not cached (host_load.hpp).
if(shm IN_LIST COMM_ENABLED_TRANSPORTS)
  add_test(NAME mp_calibration_busy_shm
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/calibration_busy_test.sh $<TARGET_FILE:commrun> $<TARGET_FILE:comm-bench> shm)
  set_tests_properties(mp_calibration_busy_shm PROPERTIES LABELS "mp;shm" TIMEOUT 120)
endif()
