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
