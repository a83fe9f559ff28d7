# Installation: the public headers, the library, a package config so that
#   find_package(comm CONFIG REQUIRED [COMPONENTS ucx ofi gloo nccl])
# works from the install prefix, a pkg-config file (comm.pc) beside it, and
# the license. Paths are relative: the prefix can be moved.
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

# pkg-config: the same library, for builds that do not use CMake. A static
# libcomm names what the transports need (pkg-config --static).
set(COMM_PC_TRANSPORTS "")
string(REPLACE ";" " " COMM_PC_TRANSPORTS "${COMM_ENABLED_TRANSPORTS}")
set(COMM_PC_REQUIRES_PRIVATE "")
set(COMM_PC_LIBS_PRIVATE "${CMAKE_DL_LIBS}")
if(COMM_PC_LIBS_PRIVATE)
  set(COMM_PC_LIBS_PRIVATE "-l${COMM_PC_LIBS_PRIVATE}")
endif()
set(COMM_PC_CFLAGS "")
if(NOT BUILD_SHARED_LIBS)
  set(COMM_PC_CFLAGS " -DCOMM_STATIC_DEFINE")
  foreach(_lib IN LISTS COMM_STATIC_LINK_TARGETS)
    if(_lib MATCHES "^ucx::" OR _lib STREQUAL "PkgConfig::COMM_UCX_PC")
      list(APPEND COMM_PC_REQUIRES_PRIVATE ucx)
    elseif(_lib STREQUAL "PkgConfig::FABRIC")
      list(APPEND COMM_PC_REQUIRES_PRIVATE libfabric)
    elseif(_lib STREQUAL "gloo")
      string(APPEND COMM_PC_LIBS_PRIVATE " -lgloo")  # Gloo ships no .pc file
    elseif(_lib MATCHES "^MPI::")
      string(APPEND COMM_PC_LIBS_PRIVATE " -lmpi")  # Open MPI's and MPICH's .pc names differ; libmpi does not
    endif()
  endforeach()
  list(REMOVE_DUPLICATES COMM_PC_REQUIRES_PRIVATE)
  string(REPLACE ";" " " COMM_PC_REQUIRES_PRIVATE "${COMM_PC_REQUIRES_PRIVATE}")
endif()
set(_comm_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(COMM_PC_TO_PREFIX "")
  set(COMM_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
  set(COMM_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  # From <prefix>/<libdir>/pkgconfig back up to <prefix>, one ".." per folder.
  string(REGEX REPLACE "[^/]+" ".." COMM_PC_TO_PREFIX "${_comm_pc_dir}")
  set(COMM_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(COMM_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(cmake/comm.pc.in ${PROJECT_BINARY_DIR}/comm.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/comm.pc DESTINATION ${_comm_pc_dir})
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/comm)
