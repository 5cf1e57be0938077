#pragma once
// The single source of locus's version: CMake, the vcpkg port and the conan recipe read these lines.
#define LOCUS_VERSION_MAJOR 0
#define LOCUS_VERSION_MINOR 1
#define LOCUS_VERSION_PATCH 0
#define LOCUS_VERSION (LOCUS_VERSION_MAJOR * 10000 + LOCUS_VERSION_MINOR * 100 + LOCUS_VERSION_PATCH)
