# Consumer tests (label `consumer`): install this build tree into a scratch
# prefix and build tests/consumer against it, with find_package (check.cmake)
# and with pkg-config alone (check_pkgconfig.cmake).
string(REPLACE ";" "," comm_consumer_transports "${COMM_ENABLED_TRANSPORTS}")
add_test(NAME consumer_installed_package
  COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR} -DSOURCE_DIR=${CMAKE_CURRENT_LIST_DIR}
          -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer -DTRANSPORTS=${comm_consumer_transports}
          -DGENERATOR=${CMAKE_GENERATOR} -DCXX=${CMAKE_CXX_COMPILER}
          -P ${CMAKE_CURRENT_LIST_DIR}/check.cmake)
set_tests_properties(consumer_installed_package PROPERTIES LABELS consumer TIMEOUT 600)

find_program(COMM_PKG_CONFIG pkg-config)
mark_as_advanced(COMM_PKG_CONFIG)
if(COMM_PKG_CONFIG)
  add_test(NAME consumer_pkg_config
    COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR} -DSOURCE_DIR=${CMAKE_CURRENT_LIST_DIR}
            -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer-pc -DTRANSPORTS=${comm_consumer_transports}
            -DVERSION=${PROJECT_VERSION} -DCXX=${CMAKE_CXX_COMPILER}
            -P ${CMAKE_CURRENT_LIST_DIR}/check_pkgconfig.cmake)
  set_tests_properties(consumer_pkg_config PROPERTIES LABELS consumer TIMEOUT 600)
else()
  message(STATUS "comm: consumer_pkg_config test off (no pkg-config found)")
endif()
