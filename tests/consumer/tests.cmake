# Consumer test (label `consumer`): installs this build tree into a scratch
# prefix and builds tests/consumer against it (see check.cmake).
string(REPLACE ";" "," comm_consumer_transports "${COMM_ENABLED_TRANSPORTS}")
add_test(NAME consumer_installed_package
  COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR} -DSOURCE_DIR=${CMAKE_CURRENT_LIST_DIR}
          -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer -DTRANSPORTS=${comm_consumer_transports}
          -DGENERATOR=${CMAKE_GENERATOR} -DCXX=${CMAKE_CXX_COMPILER}
          -P ${CMAKE_CURRENT_LIST_DIR}/check.cmake)
set_tests_properties(consumer_installed_package PROPERTIES LABELS consumer TIMEOUT 600)
