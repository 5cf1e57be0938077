import os
import re

from conan import ConanFile
from conan.tools.cmake import CMake, CMakeToolchain, cmake_layout
from conan.tools.files import copy, load, rmdir

required_conan_version = ">=2.0"


class LocusConan(ConanFile):
    name = "locus"
    description = ("Header-only C++20 tensors whose device is part of their type: fused expressions, "
                   "placement checked at compile time.")
    license = "Apache-2.0"
    topics = ("cuda", "thrust", "tensor", "expression-templates", "header-only")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"  # only to run CMake's install; cleared below
    options = {"cuda": [True, False]}
    default_options = {"cuda": False}
    exports_sources = "CMakeLists.txt", "cmake/*", "include/*", "LICENSE", "README.md"
    no_copy_source = True

    def set_version(self):
        # include/locus/version.hpp is the single source of the version.
        text = load(self, os.path.join(self.recipe_folder, "include", "locus", "version.hpp"))
        parts = [re.search(rf"#define LOCUS_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
        self.version = ".".join(parts)

    def layout(self):
        cmake_layout(self)

    def generate(self):
        tc = CMakeToolchain(self)
        tc.cache_variables["LOCUS_BUILD_TESTS"] = False
        tc.cache_variables["LOCUS_BUILD_EXAMPLES"] = False
        tc.cache_variables["LOCUS_BUILD_BENCHMARKS"] = False
        tc.cache_variables["LOCUS_INSTALL"] = True
        tc.generate()

    def build(self):
        CMake(self).configure()

    def package(self):
        copy(self, "LICENSE", src=self.source_folder, dst=os.path.join(self.package_folder, "licenses"))
        CMake(self).install()
        rmdir(self, os.path.join(self.package_folder, "share", "doc"))

    def package_id(self):
        # Header-only: one package for every setting and option (the cuda option selects the
        # backend where locus is consumed, through find_package(locus COMPONENTS cuda)).
        self.info.clear()

    def package_info(self):
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = []
        # Consumers get locus's own locusConfig.cmake, which finds CCCL and builds the backend.
        self.cpp_info.set_property("cmake_find_mode", "none")
        self.cpp_info.set_property("cmake_file_name", "locus")
        self.cpp_info.set_property("cmake_target_name", "locus::locus")
        self.cpp_info.set_property("pkg_config_name", "locus")
        self.cpp_info.builddirs = [os.path.join("share", "cmake", "locus")]
