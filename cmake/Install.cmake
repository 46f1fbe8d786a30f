# SPDX-License-Identifier: Apache-2.0
# `cmake --install`: headers, static and shared libraries, the CLI, a CMake package
# (find_package(vkpaged) gives vkpaged::vkpaged and vkpaged::vkpaged_static) and vkpaged.pc.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/vkpaged DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS vkpaged_shared vkpaged_static EXPORT vkpagedTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set_target_properties(vkpaged_shared PROPERTIES EXPORT_NAME vkpaged)
set_target_properties(vkpaged_static PROPERTIES EXPORT_NAME vkpaged_static)
install(EXPORT vkpagedTargets NAMESPACE vkpaged:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkpaged)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/vkpagedConfig.cmake.in
  ${PROJECT_BINARY_DIR}/vkpagedConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkpaged)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vkpagedConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vkpagedConfig.cmake ${PROJECT_BINARY_DIR}/vkpagedConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkpaged)

# vkpaged.pc finds its prefix from its own place (${pcfiledir}), so that it stays right when
# `cmake --install --prefix` installs somewhere else than CMAKE_INSTALL_PREFIX.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(VKPAGED_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH VKPAGED_PC_UP "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
  string(REGEX REPLACE "/$" "" VKPAGED_PC_UP "${VKPAGED_PC_UP}")
  set(VKPAGED_PC_PREFIX "\${pcfiledir}/${VKPAGED_PC_UP}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/vkpaged.pc.in ${PROJECT_BINARY_DIR}/vkpaged.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/vkpaged.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
