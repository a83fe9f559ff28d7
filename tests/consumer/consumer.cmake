# comm_consumer(<target> <version> <transports>): the consumer program
# (tests/consumer/main.cpp) linked through comm::comm and, for each transport
# in the comma-separated list, its target comm::<transport>; the program then
# checks the library against <version> and <transports>. Shared by
# tests/consumer (the CMake package) and conan/test_package (Conan's).
function(comm_consumer target version transports)
  add_executable(${target} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/main.cpp)
  target_link_libraries(${target} PRIVATE comm::comm)
  target_compile_features(${target} PRIVATE cxx_std_20)
  string(REPLACE "," ";" list "${transports}")
  foreach(t IN LISTS list)
    if(NOT TARGET comm::${t})
      message(FATAL_ERROR "the comm package has the transport ${t} but no target comm::${t}")
    endif()
    target_link_libraries(${target} PRIVATE comm::${t})
  endforeach()
  target_compile_definitions(${target} PRIVATE COMM_CONSUMER_VERSION="${version}"
                                               COMM_CONSUMER_TRANSPORTS="${transports}")
endfunction()
