# comm-info --version and --json (label mp, plus info):
#   version: "comm <project version>", then one line per transport of this
#     build naming its library and a version that agrees with what pkg-config
#     says about UCX and libfabric (independently of the library's own call);
#   json: 2 ranks under commrun; the report parses (CMake's JSON reader, not
#     ours) and says what the job is: 2 ranks on one host, 4 links, a
#     selection table per collective starting at 0 B, candidates per --size.
#
# Two modes, like bench.cmake: included it registers the tests; run with
# `cmake -P info.cmake -D...` it is the test.

include(${CMAKE_CURRENT_LIST_DIR}/script_test.cmake)

if(CMAKE_SCRIPT_MODE_FILE)
  comm_script_require(COMMRUN INFO MODE VERSION TRANSPORTS)
  string(REPLACE "," ";" transports "${TRANSPORTS}")
  if(MODE STREQUAL "version")
    comm_script_run("comm-info --version" out err "${INFO}" --version)
    if(NOT out MATCHES "^comm ${VERSION}\n")
      message(FATAL_ERROR "comm-info --version does not start with 'comm ${VERSION}':\n${out}")
    endif()
    set(library_ucx UCX)
    set(library_ofi libfabric)
    set(library_gloo Gloo)
    set(library_nccl NCCL)
    set(library_mpi MPI)
    set(pc_ucx ucx)
    set(pc_ofi libfabric)
    foreach(t IN LISTS transports)
      if(t STREQUAL "local" OR t STREQUAL "shm")  # part of comm: no library
        continue()
      endif()
      if(NOT out MATCHES "\n  ${t} +${library_${t}} ([^\n]*[0-9]+\\.[0-9]+[^\n]*)\n")
        message(FATAL_ERROR "comm-info --version has no '${t}  ${library_${t}} <version>' line:\n${out}")
      endif()
      set(shown "${CMAKE_MATCH_1}")
      if(pc_${t})
        execute_process(COMMAND pkg-config --modversion ${pc_${t}} OUTPUT_VARIABLE pc OUTPUT_STRIP_TRAILING_WHITESPACE
                        RESULT_VARIABLE pc_rc ERROR_QUIET)
        # libfabric's fi_version() has major.minor only: compare what both say.
        string(REGEX MATCH "^[0-9]+\\.[0-9]+" pc_mm "${pc}")
        if(pc_rc EQUAL 0 AND NOT shown MATCHES "^${pc_mm}")
          message(FATAL_ERROR "comm-info says ${t} is ${library_${t}} ${shown}; pkg-config says ${pc}")
        endif()
      endif()
    endforeach()
    message(STATUS "comm-info --version:\n${out}")
    return()
  endif()

  comm_script_run("comm-info --json on 2 ranks" out err "${COMMRUN}" -n 2 --timeout 100 -- "${INFO}" --json --size 8
                  --size 1M)
  string(REGEX REPLACE "(^|\n)\\[r0\\] " "\\1" text "${out}")  # commrun's rank prefix
  string(JSON ranks ERROR_VARIABLE e GET "${text}" ranks)
  if(e)
    message(FATAL_ERROR "comm-info --json does not parse: ${e}\n${text}")
  endif()
  string(JSON version GET "${text}" comm_version)
  string(JSON nhosts LENGTH "${text}" hosts)
  string(JSON host_ranks LENGTH "${text}" hosts 0 ranks)
  string(JSON nlinks LENGTH "${text}" links)
  string(JSON ntransports LENGTH "${text}" transports)
  string(JSON ncand LENGTH "${text}" candidates)
  string(JSON bytes1 GET "${text}" candidates 1 bytes)
  string(JSON first GET "${text}" selection allreduce table 0 min_bytes)
  string(JSON pick GET "${text}" candidates 0 collectives allreduce auto)
  foreach(check "ranks;2" "version;${VERSION}" "nhosts;1" "host_ranks;2" "nlinks;4" "ncand;2" "bytes1;1048576"
                "first;0")
    list(GET check 0 var)
    list(GET check 1 want)
    if(NOT "${${var}}" STREQUAL "${want}")
      message(FATAL_ERROR "comm-info --json: ${var} is '${${var}}', expected '${want}'\n${text}")
    endif()
  endforeach()
  list(LENGTH transports nbuilt)
  if(ntransports LESS nbuilt)
    message(FATAL_ERROR "comm-info --json lists ${ntransports} transports; this build has ${nbuilt}")
  endif()
  string(JSON algorithms GET "${text}" selection allreduce algorithms)
  if(NOT algorithms MATCHES "\"${pick}\"")
    message(FATAL_ERROR "auto picks '${pick}', which is not among the algorithms ${algorithms}")
  endif()
  message(STATUS "comm-info --json: 2 ranks, 1 host, 4 links, auto picks ${pick} at 8 B")
  return()
endif()

comm_script_tests_need(comm-info)
string(REPLACE ";" "," comm_info_transports "${COMM_ENABLED_TRANSPORTS}")
foreach(mode version json)
  comm_add_script_test(NAME comm_info_${mode} LABELS mp info TIMEOUT 120 ENV UCX_TLS=shm UCX_NET_DEVICES=lo
    DEFINES COMMRUN=$<TARGET_FILE:commrun> INFO=$<TARGET_FILE:comm-info> MODE=${mode} VERSION=${PROJECT_VERSION}
            TRANSPORTS=${comm_info_transports})
endforeach()
