# Install rules: headers, the exported target locus::locus, locusConfig.cmake (+ version file,
# architecture-independent), the backend helper, and a pkg-config file.
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

set(LOCUS_INSTALL_CMAKEDIR "${CMAKE_INSTALL_DATADIR}/cmake/locus" CACHE STRING "Where locusConfig.cmake goes")

install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS locus EXPORT locusTargets)
install(EXPORT locusTargets NAMESPACE locus:: DESTINATION ${LOCUS_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/locusConfig.cmake.in ${PROJECT_BINARY_DIR}/locusConfig.cmake
                              INSTALL_DESTINATION ${LOCUS_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/locusConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/locusConfig.cmake ${PROJECT_BINARY_DIR}/locusConfigVersion.cmake
              cmake/locusBackend.cmake
        DESTINATION ${LOCUS_INSTALL_CMAKEDIR})

# pkg-config: the include path, C++20 and, where they were found here, Thrust's headers and OpenMP.
set(LOCUS_PC_CFLAGS "-std=c++20")
if(TARGET _Thrust_Thrust)
  get_target_property(_cccl_includes _Thrust_Thrust INTERFACE_INCLUDE_DIRECTORIES)
  foreach(dir IN LISTS _cccl_includes)
    # Debian's Thrust lives in /usr/include: -I/usr/include would break the compiler's #include_next.
    if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
      string(APPEND LOCUS_PC_CFLAGS " -I${dir}")
    endif()
  endforeach()
endif()
set(LOCUS_PC_LIBS "-pthread")
string(APPEND LOCUS_PC_CFLAGS " -pthread")
if(TARGET OpenMP::OpenMP_CXX AND NOT LOCUS_ENABLE_CUDA)
  string(APPEND LOCUS_PC_CFLAGS " ${OpenMP_CXX_FLAGS}")
  string(APPEND LOCUS_PC_LIBS " ${OpenMP_CXX_FLAGS}")
endif()
configure_file(cmake/locus.pc.in ${PROJECT_BINARY_DIR}/locus.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/locus.pc DESTINATION ${CMAKE_INSTALL_DATADIR}/pkgconfig)
install(FILES LICENSE README.md DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/locus)
