# Installation: headers, the library, the plugin modules, and a package
# config so that find_package(comm CONFIG [COMPONENTS ucx ofi gloo nccl])
# works. Only public headers (include/comm) are installed.
include(CMakePackageConfigHelpers)

install(TARGETS comm EXPORT commTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/comm DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT commTargets NAMESPACE comm:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/comm)

# What a static libcomm needs from its consumers' link line.
set(COMM_STATIC_DEPENDENCIES "")
if(NOT BUILD_SHARED_LIBS)
  set(COMM_STATIC_DEPENDENCIES ${COMM_ENABLED_TRANSPORTS})
endif()
configure_package_config_file(cmake/commConfig.cmake.in ${PROJECT_BINARY_DIR}/commConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/comm)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/commConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/commConfig.cmake ${PROJECT_BINARY_DIR}/commConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/comm)
