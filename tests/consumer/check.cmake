# cmake -DBUILD_DIR=<comm build tree> -DSOURCE_DIR=<tests/consumer> -DWORK_DIR=<scratch>
#       -DTRANSPORTS=<a,b,...> [-DGENERATOR=<gen>] [-DCXX=<compiler>] -P check.cmake
#
# What a user does with a released comm, as a test: install the build tree into
# a fresh prefix, build tests/consumer against it with find_package(comm
# COMPONENTS <every transport it has>), run it (4-rank all-reduce), and check
# that asking for a transport the installation lacks fails at configure time
# with a message that names the transport and how to get it.
foreach(v BUILD_DIR SOURCE_DIR WORK_DIR TRANSPORTS)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check.cmake: -D${v}=... is required")
  endif()
endforeach()
string(REPLACE "," ";" transports "${TRANSPORTS}")
set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (exit ${rc}):\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

set(configure_args -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
if(GENERATOR)
  list(APPEND configure_args -G ${GENERATOR})
endif()
if(CXX)
  list(APPEND configure_args -DCMAKE_CXX_COMPILER=${CXX})
endif()

run("installing ${BUILD_DIR} into ${prefix}" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/comm/comm.hpp include/comm/communicator.hpp)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "the installation lacks ${f}")
  endif()
endforeach()
file(GLOB_RECURSE private_headers ${prefix}/include/*executor* ${prefix}/include/*selector*)
if(private_headers)
  message(FATAL_ERROR "private headers were installed: ${private_headers}")
endif()

run("configuring the consumer with COMPONENTS ${transports}"
    ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build ${configure_args} -DCOMM_CONSUMER_COMPONENTS=${TRANSPORTS})
run("building the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
file(GLOB consumer_exe ${WORK_DIR}/build/consumer ${WORK_DIR}/build/*/consumer)
run("running the consumer" ${consumer_exe})
if(NOT out MATCHES "4-rank all-reduce over the installed comm: ok")
  message(FATAL_ERROR "the consumer did not report success:\n${out}")
endif()
message(STATUS "consumer built against ${prefix} with COMPONENTS ${transports}: ${out}")

# A transport this installation does not have (a real one if any is missing).
set(missing no_such_transport)
foreach(t nccl gloo ofi ucx)
  if(NOT t IN_LIST transports)
    set(missing ${t})
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build-missing ${configure_args}
                        -DCOMM_CONSUMER_COMPONENTS=${missing}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "find_package(comm COMPONENTS ${missing}) succeeded, but this comm has only: ${transports}")
endif()
if(NOT "${out}${err}" MATCHES "comm was built without the '${missing}' transport")
  message(FATAL_ERROR "find_package(comm COMPONENTS ${missing}) failed without saying why:\n${out}\n${err}")
endif()
string(REGEX MATCH "comm was built without.*it has\\." said "${err}")
string(REGEX REPLACE "[ \n]+" " " said "${said}")
message(STATUS "asking for '${missing}' fails as it should: ${said}")
