# Included by the ELF checks (check_deps.cmake, check_plugin.cmake), which run
# as `cmake -P`: READELF and NM default to the tools on PATH, and
# comm_elf_query runs one of them on ${LIB}.
if(NOT READELF)
  find_program(READELF readelf REQUIRED)
endif()
if(NOT NM)
  find_program(NM nm REQUIRED)
endif()

# comm_elf_query(<out-var> <tool> <arg>...): stores the output of
# `<tool> <arg>... ${LIB}` in <out-var>; stops the script if the tool fails.
function(comm_elf_query out tool)
  execute_process(COMMAND "${tool}" ${ARGN} "${LIB}" OUTPUT_VARIABLE _out RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${tool} ${ARGN} ${LIB} failed")
  endif()
  set(${out} "${_out}" PARENT_SCOPE)
endfunction()
