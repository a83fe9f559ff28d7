# cmake -DBUILD_DIR=<comm build tree> -DSOURCE_DIR=<tests/consumer> -DWORK_DIR=<scratch>
#       -DTRANSPORTS=<a,b,...> -DVERSION=<x.y.z> -DCXX=<compiler> -P check_pkgconfig.cmake
#
# A build that does not use CMake: install the build tree into a fresh prefix,
# ask pkg-config about comm (version, transports, flags), compile
# tests/consumer/main.cpp with those flags alone and run it. Then move the
# prefix and do it again: the .pc file must find everything relative to itself.
foreach(v BUILD_DIR SOURCE_DIR WORK_DIR TRANSPORTS VERSION CXX)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_pkgconfig.cmake: -D${v}=... is required")
  endif()
endforeach()
find_program(PKG_CONFIG pkg-config REQUIRED)
file(REMOVE_RECURSE ${WORK_DIR})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (exit ${rc}):\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

# Builds and runs the consumer against the comm.pc below `prefix`.
function(build_with_pkg_config prefix tag)
  file(GLOB_RECURSE pc_files ${prefix}/*/comm.pc)
  list(LENGTH pc_files n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "expected one comm.pc under ${prefix}, found: ${pc_files}")
  endif()
  get_filename_component(pc_dir ${pc_files} DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} ${pc_dir})
  run("pkg-config --modversion comm" ${PKG_CONFIG} --modversion comm)
  if(NOT out STREQUAL VERSION)
    message(FATAL_ERROR "pkg-config says comm ${out}; the build is ${VERSION}")
  endif()
  run("pkg-config --variable=transports comm" ${PKG_CONFIG} --variable=transports comm)
  string(REPLACE "," " " want "${TRANSPORTS}")
  if(NOT out STREQUAL want)
    message(FATAL_ERROR "pkg-config says the transports are '${out}'; the build has '${want}'")
  endif()
  set(static "")
  file(GLOB archives ${prefix}/*/libcomm.a ${prefix}/*/*/libcomm.a)
  if(archives)
    set(static --static)
  endif()
  run("pkg-config --cflags --libs comm" ${PKG_CONFIG} ${static} --cflags --libs comm)
  separate_arguments(flags UNIX_COMMAND "${out}")
  run("pkg-config --variable=libdir comm" ${PKG_CONFIG} --variable=libdir comm)
  set(libdir "${out}")
  if(NOT EXISTS ${libdir})
    message(FATAL_ERROR "pkg-config's libdir ${libdir} does not exist")
  endif()
  set(exe ${WORK_DIR}/consumer-${tag})
  run("compiling the consumer with pkg-config's flags" ${CXX} -std=c++20 ${SOURCE_DIR}/main.cpp
      "-DCOMM_CONSUMER_VERSION=\"${VERSION}\"" "-DCOMM_CONSUMER_TRANSPORTS=\"${TRANSPORTS}\"" ${flags}
      -Wl,-rpath,${libdir} -o ${exe})
  run("running the consumer" ${exe})
  if(NOT out MATCHES "4-rank all-reduce over the installed comm: ok")
    message(FATAL_ERROR "the consumer did not report success:\n${out}")
  endif()
  message(STATUS "pkg-config consumer (${tag}, ${static} ${flags}): ${out}")
endfunction()

run("installing ${BUILD_DIR}" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
if(NOT EXISTS ${WORK_DIR}/prefix/share/doc/comm/LICENSE)
  message(FATAL_ERROR "the installation lacks share/doc/comm/LICENSE")
endif()
build_with_pkg_config(${WORK_DIR}/prefix installed)
file(RENAME ${WORK_DIR}/prefix ${WORK_DIR}/moved)
build_with_pkg_config(${WORK_DIR}/moved moved)
