# The ABI guard of the C API: the comm_* symbols libcomm.so exports, each with
# its version tag (comm_allreduce@@COMM_1.0), must be exactly those listed in
# comm_symbols.txt. A removed symbol or a changed tag breaks binaries built
# against an earlier library; an unlisted one is an addition nobody decided on.
#
# To add a function deliberately: declare it in include/comm/comm.h, put it in
# a NEW version node of src/capi/comm.map (e.g. `COMM_1.1 { global: comm_new; }
# COMM_1.0;` -- never into a released node), bump COMM_ABI_VERSION_MINOR, and
# regenerate the list:  cmake -DLIBRARY=build/lib/libcomm.so -DLIST=tests/c/abi/comm_symbols.txt
#                             -DNM=nm -DUPDATE=ON -P tests/c/abi/check_symbols.cmake
# Removing or renaming a symbol needs a new ABI major version (and soname).
#
# cmake -DLIBRARY=<libcomm.so> -DLIST=<comm_symbols.txt> -DNM=<nm> [-DUPDATE=ON] -P check_symbols.cmake
execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY}
  OUTPUT_VARIABLE nm_out ERROR_VARIABLE nm_err RESULT_VARIABLE nm_rc)
if(NOT nm_rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D ${LIBRARY} failed (${nm_rc}): ${nm_err}")
endif()
string(REPLACE "\n" ";" lines "${nm_out}")
set(exported "")
foreach(line IN LISTS lines)
  # "<address> T comm_allreduce@@COMM_1.0": C API symbols only (C++ ones are mangled _Z...).
  if(line MATCHES "^[0-9a-fA-F]+ [A-Za-z] (comm_[A-Za-z0-9_]+(@@?[A-Za-z0-9_.]+)?)$")
    list(APPEND exported "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(SORT exported)
if(NOT exported)
  message(FATAL_ERROR "${LIBRARY} exports no comm_* symbol: is the C API compiled in?")
endif()

if(UPDATE)
  string(REPLACE ";" "\n" text "${exported}")
  file(WRITE ${LIST} "# The C API symbols of libcomm.so with their version tags, checked by the ctest\n# c_abi_symbols. Change only deliberately: see tests/c/abi/check_symbols.cmake.\n${text}\n")
  list(LENGTH exported n)
  message(STATUS "wrote ${n} symbols to ${LIST}")
  return()
endif()

file(STRINGS ${LIST} listed REGEX "^comm_")
list(SORT listed)
set(removed ${listed})
list(REMOVE_ITEM removed ${exported})
set(added ${exported})
list(REMOVE_ITEM added ${listed})
foreach(s IN LISTS exported)
  if(NOT s MATCHES "@@")
    list(APPEND unversioned ${s})
  endif()
endforeach()
set(problems "")
if(removed)
  string(APPEND problems "removed or re-tagged (breaks existing binaries): ${removed}\n")
endif()
if(added)
  string(APPEND problems "exported but not in ${LIST} (put new symbols in a new node of src/capi/comm.map, then update the list): ${added}\n")
endif()
if(unversioned)
  string(APPEND problems "without a version tag (the link did not use src/capi/comm.map): ${unversioned}\n")
endif()
if(problems)
  message(FATAL_ERROR "C ABI check failed for ${LIBRARY}:\n${problems}See tests/c/abi/check_symbols.cmake for how to change the ABI deliberately.")
endif()
list(LENGTH exported n)
message(STATUS "C ABI: ${n} symbols, all listed and versioned")
