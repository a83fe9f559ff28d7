# Installation: the public headers, the library, and a package config so that
#   find_package(comm CONFIG REQUIRED [COMPONENTS ucx ofi gloo nccl])
# works from the install prefix. Paths are relative: the prefix can be moved.
# Tools and the NCCL plugin module install themselves (tools/, transports/nccl/).
include(CMakePackageConfigHelpers)

install(TARGETS comm EXPORT commTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# comm/mpi.hpp (the MPI embedding helpers) only when the mpi transport is built.
set(_comm_header_excludes "")
if(NOT "mpi" IN_LIST COMM_ENABLED_TRANSPORTS)
  set(_comm_header_excludes PATTERN "mpi.hpp" EXCLUDE)
endif()
install(DIRECTORY include/comm DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h"
        ${_comm_header_excludes})
install(EXPORT commTargets NAMESPACE comm:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/comm)

# A static libcomm hands the transports' libraries on to its consumers through
# the imported targets it was linked with (e.g. ucx::ucp, PkgConfig::FABRIC,
# gloo); the package config must recreate exactly those targets, so record them.
set(COMM_STATIC_LINK_TARGETS "")
if(NOT BUILD_SHARED_LIBS)
  get_target_property(_comm_libs comm LINK_LIBRARIES)
  foreach(_lib IN LISTS _comm_libs)
    if(_lib MATCHES "^(ucx::|PkgConfig::|MPI::)" OR _lib STREQUAL "gloo")
      list(APPEND COMM_STATIC_LINK_TARGETS ${_lib})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES COMM_STATIC_LINK_TARGETS)
endif()

configure_package_config_file(cmake/commConfig.cmake.in ${PROJECT_BINARY_DIR}/commConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/comm)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/commConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/commConfig.cmake ${PROJECT_BINARY_DIR}/commConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/comm)
