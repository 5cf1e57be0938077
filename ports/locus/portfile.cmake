# locus is header-only: one release configuration, nothing under lib/.
set(VCPKG_BUILD_TYPE release)

# As an overlay port inside the repository (vcpkg install locus --overlay-ports=<repo>/ports, or
# the repository's vcpkg-configuration.json) the source is this checkout. Copied into a registry,
# the port takes the release tarball; REPO's owner and the SHA512 are filled in when the release
# is published.
if(EXISTS "${CMAKE_CURRENT_LIST_DIR}/../../include/locus/version.hpp")
  get_filename_component(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
else()
  vcpkg_from_github(
    OUT_SOURCE_PATH SOURCE_PATH
    REPO locus/locus
    REF "v${VERSION}"
    SHA512 0
    HEAD_REF main
  )
endif()

vcpkg_check_features(OUT_FEATURE_OPTIONS FEATURE_OPTIONS
  FEATURES
    cuda LOCUS_VCPKG_FEATURE_CUDA
)

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    -DLOCUS_BUILD_TESTS=OFF
    -DLOCUS_BUILD_EXAMPLES=OFF
    -DLOCUS_BUILD_BENCHMARKS=OFF
    -DLOCUS_INSTALL=ON
    ${FEATURE_OPTIONS}
  MAYBE_UNUSED_VARIABLES
    LOCUS_VCPKG_FEATURE_CUDA
)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(CONFIG_PATH share/cmake/locus)
vcpkg_fixup_pkgconfig()

file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/lib" "${CURRENT_PACKAGES_DIR}/share/doc")
file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
