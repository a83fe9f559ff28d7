# Shared build settings for every target of the project.

function(comm_set_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wswitch-enum)
    if(COMM_WARNINGS_AS_ERRORS)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()

if(COMM_SANITIZE)
  add_compile_options(-fsanitize=${COMM_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${COMM_SANITIZE})
endif()

# comm_backend(NAME FOUND_VAR PACKAGE_HINT): resolves COMM_WITH_<NAME> from
# AUTO/ON/OFF and whether the dependency was found, and says so at configure time.
function(comm_backend name found hint)
  set(opt COMM_WITH_${name})
  string(TOUPPER "${${opt}}" mode)
  if(mode STREQUAL "OFF" OR mode STREQUAL "FALSE" OR mode STREQUAL "0")
    message(STATUS "comm: ${name} transport off (${opt}=OFF)")
    set(COMM_HAVE_${name} OFF PARENT_SCOPE)
  elseif(${found})
    message(STATUS "comm: ${name} transport on (found)")
    set(COMM_HAVE_${name} ON PARENT_SCOPE)
  elseif(mode STREQUAL "AUTO")
    message(STATUS "comm: ${name} transport off (not found; install ${hint})")
    set(COMM_HAVE_${name} OFF PARENT_SCOPE)
  else()
    message(FATAL_ERROR "comm: ${opt}=${${opt}} but ${name} was not found; install ${hint} or set ${opt}=OFF")
  endif()
endfunction()

# comm_add_transport(<name> SOURCES <file>... [LIBRARIES <target>...] [DEFINITIONS <def>...]),
# called from transports/<name>/CMakeLists.txt once the transport is on: compiles
# SOURCES (relative to that folder) into `comm` with COMM_HAVE_<NAME>=1 and
# DEFINITIONS, links LIBRARIES into comm (privately) and comm_internal (publicly,
# for the tests), and records <name> in COMM_ENABLED_TRANSPORTS of transports/.
# A macro, so that it can set that list in the transport folder's parent scope.
macro(comm_add_transport name)
  cmake_parse_arguments(_comm_transport "" "" "SOURCES;LIBRARIES;DEFINITIONS" ${ARGN})
  string(TOUPPER "${name}" _comm_transport_upper)
  list(TRANSFORM _comm_transport_SOURCES PREPEND "${CMAKE_CURRENT_SOURCE_DIR}/")
  target_sources(comm_objects PRIVATE ${_comm_transport_SOURCES})
  target_compile_definitions(comm_objects PRIVATE COMM_HAVE_${_comm_transport_upper}=1 ${_comm_transport_DEFINITIONS})
  if(_comm_transport_LIBRARIES)
    target_link_libraries(comm_objects PRIVATE ${_comm_transport_LIBRARIES})
    target_link_libraries(comm PRIVATE ${_comm_transport_LIBRARIES})
    target_link_libraries(comm_internal PUBLIC ${_comm_transport_LIBRARIES})
  endif()
  list(APPEND COMM_ENABLED_TRANSPORTS ${name})
  set(COMM_ENABLED_TRANSPORTS ${COMM_ENABLED_TRANSPORTS} PARENT_SCOPE)
endmacro()
