# locus_create_backend(<kind>): creates the IMPORTED target locus::_backend that locus::locus links:
# Thrust on the host system (OpenMP, or the sequential CPP system without it) or on CUDA, plus
# OpenMP and the nvcc flags locus needs. Used by the build tree and, installed, by locusConfig.cmake,
# so that the backend is chosen where locus is consumed.
#   kind: host | cuda      (cuda needs enable_language(CUDA) first)
# Also here, for consumers: locus_separate_runtime(<target>) (below).
include_guard(GLOBAL)

# locus_find_thrust([REQUIRED|QUIET]): Thrust's CMake package. First CCCL 3 from the CUDA Toolkit
# (CUDA_PATH, CUDA_HOME, CUDAToolkit_ROOT or /usr/local/cuda, nvcc on PATH or not); without it
# Thrust 1.x, e.g. Debian 12's libthrust-dev + libcub-dev (1.17.2, /usr/share/cmake/thrust), which
# the host and emulated backends need alone. Two calls: Thrust's version files accept one major
# version only. The cuda backend insists on CCCL 3 (locus_create_backend).
macro(locus_find_thrust)
  find_package(Thrust 3.0 CONFIG QUIET
               HINTS "$ENV{CUDA_PATH}/lib64/cmake" "$ENV{CUDA_HOME}/lib64/cmake" "${CUDAToolkit_ROOT}/lib64/cmake"
                     /usr/local/cuda/lib64/cmake)
  if(NOT Thrust_FOUND)
    find_package(Thrust 1.17 CONFIG QUIET)
  endif()
  set(_locus_thrust_args ${ARGN})
  if(Thrust_FOUND AND NOT "QUIET" IN_LIST _locus_thrust_args)
    message(STATUS "locus: Thrust ${Thrust_VERSION} (${Thrust_DIR})")
  elseif(NOT Thrust_FOUND AND "REQUIRED" IN_LIST _locus_thrust_args)
    message(FATAL_ERROR "locus: Thrust was not found: install the CUDA Toolkit (CCCL 3; set CUDA_PATH when it is not "
                        "in /usr/local/cuda) or, for host builds, Debian's libthrust-dev and libcub-dev")
  endif()
  unset(_locus_thrust_args)
endmacro()

function(locus_create_backend kind)
  if(TARGET locus::_backend)
    return()
  endif()
  find_package(OpenMP QUIET COMPONENTS CXX)
  if(kind STREQUAL "cuda")
    get_property(_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
    if(NOT "CUDA" IN_LIST _languages)
      message(FATAL_ERROR "locus: the cuda backend needs CUDA enabled first: project(... LANGUAGES CXX CUDA) or "
                          "enable_language(CUDA) before find_package(locus COMPONENTS cuda)")
    endif()
    if(Thrust_VERSION VERSION_LESS 3.0)
      message(FATAL_ERROR "locus: the cuda backend needs CCCL 3 (the CUDA Toolkit's Thrust and CUB); found Thrust "
                          "${Thrust_VERSION} in ${Thrust_DIR}, which serves host builds only")
    endif()
    thrust_create_target(locus::_thrust HOST CPP DEVICE CUDA)
  elseif(TARGET OpenMP::OpenMP_CXX)
    thrust_create_target(locus::_thrust HOST CPP DEVICE OMP)
  else()
    thrust_create_target(locus::_thrust HOST CPP DEVICE CPP)
  endif()
  add_library(locus::_backend INTERFACE IMPORTED GLOBAL)
  set_property(GLOBAL PROPERTY LOCUS_BACKEND_KIND ${kind})  # for locus_separate_runtime
  target_link_libraries(locus::_backend INTERFACE locus::_thrust)
  # The host pool's threads (backend/pool.hpp).
  find_package(Threads REQUIRED)
  target_link_libraries(locus::_backend INTERFACE Threads::Threads)
  # dlsym (backend/blas.hpp finds a pthreads OpenBLAS by name): in libc since glibc 2.34, -ldl before.
  if(CMAKE_DL_LIBS)
    target_link_libraries(locus::_backend INTERFACE ${CMAKE_DL_LIBS})
  endif()
  if(kind STREQUAL "cuda")
    # CMake 3.25 believes nvcc 13 defaults to C++20 and omits the flag: spell it out.
    target_compile_options(locus::_backend INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 --expt-relaxed-constexpr>)
    if(TARGET OpenMP::OpenMP_CXX)
      # nvcc passes -fopenmp to its host compiler; OpenMP::OpenMP_CXX only knows g++'s spelling.
      target_compile_options(locus::_backend INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fopenmp>
                                                       $<$<COMPILE_LANGUAGE:CXX>:${OpenMP_CXX_FLAGS}>)
      target_link_libraries(locus::_backend INTERFACE ${OpenMP_CXX_LIBRARIES})
    endif()
  elseif(TARGET OpenMP::OpenMP_CXX)
    target_link_libraries(locus::_backend INTERFACE OpenMP::OpenMP_CXX)
  endif()
  if(kind STREQUAL "cuda")
    find_package(CUDAToolkit REQUIRED)
    target_link_libraries(locus::_backend INTERFACE CUDA::cublas CUDA::cudart)
    # NCCL (dist::nccl, the default communicator between GPUs) comes with the CUDA Toolkit here
    # (nccl.h, libnccl.so.2 in its include and lib64 folders); without it dist::nccl does not compile
    # and dist::automatic sums in process. LOCUS_WITH_NCCL=OFF leaves it out.
    if(NOT DEFINED LOCUS_WITH_NCCL OR LOCUS_WITH_NCCL)
      find_path(LOCUS_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
      find_library(LOCUS_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
      if(LOCUS_NCCL_INCLUDE_DIR AND LOCUS_NCCL_LIBRARY)
        target_compile_definitions(locus::_backend INTERFACE LOCUS_HAS_NCCL=1)
        target_include_directories(locus::_backend INTERFACE ${LOCUS_NCCL_INCLUDE_DIR})
        target_link_libraries(locus::_backend INTERFACE ${LOCUS_NCCL_LIBRARY})
      endif()
    endif()
  endif()
  find_package(ZLIB QUIET)
  if(TARGET ZLIB::ZLIB)
    target_compile_definitions(locus::_backend INTERFACE LOCUS_HAS_ZLIB=1)
    target_link_libraries(locus::_backend INTERFACE ZLIB::ZLIB)
  endif()
  locus_find_cblas(_cblas_libraries)
  if(_cblas_libraries)
    target_compile_definitions(locus::_backend INTERFACE LOCUS_HAS_CBLAS=1)
    target_link_libraries(locus::_backend INTERFACE ${_cblas_libraries})
  endif()
endfunction()

# locus_separate_runtime(<target>): locus's run-time part (the device registry, its arenas, the
# placement log, the data and checkpoint readers, the messages of its errors) compiled once for
# <target> instead of in each of its files (README, "Compile time: the run-time part compiled
# once"): LOCUS_SEPARATE_RUNTIME=1 on every file of <target>, and a generated file that defines
# LOCUS_RUNTIME_IMPLEMENTATION and includes <locus/runtime.hpp>, compiled like the others (by nvcc
# with the cuda backend), kept out of precompiled headers and unity builds. Call it for the
# executable or shared library, once per program: a static library linked into it needs only
# LOCUS_SEPARATE_RUNTIME=1. A second call for the same target does nothing.
function(locus_separate_runtime target)
  if(NOT TARGET ${target})
    message(FATAL_ERROR "locus_separate_runtime: '${target}' is not a target")
  endif()
  get_target_property(_aliased ${target} ALIASED_TARGET)
  if(_aliased)
    set(target ${_aliased})
  endif()
  get_target_property(_type ${target} TYPE)
  get_target_property(_imported ${target} IMPORTED)
  if(_type STREQUAL "OBJECT_LIBRARY")
    message(FATAL_ERROR "locus_separate_runtime: '${target}' is an OBJECT library: its objects, the run-time part "
                        "among them, go into every target that uses it; call it for the executable or shared library")
  endif()
  if(_imported OR NOT _type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY|STATIC_LIBRARY)$")
    message(FATAL_ERROR "locus_separate_runtime: '${target}' (${_type}) compiles nothing of its own; give it an "
                        "executable or a library with sources")
  endif()
  get_target_property(_done ${target} LOCUS_SEPARATE_RUNTIME_FILE)
  if(_done)
    return()
  endif()
  get_property(_kind GLOBAL PROPERTY LOCUS_BACKEND_KIND)
  if(NOT _kind)
    message(FATAL_ERROR "locus_separate_runtime: no locus backend in this project yet: call it after find_package(locus) "
                        "or add_subdirectory(locus)")
  endif()
  # In the target's own build folder, under a name any file system takes (an ALIAS's "::" is gone
  # already; "my-app+" becomes "my_app_").
  get_target_property(_dir ${target} BINARY_DIR)
  string(MAKE_C_IDENTIFIER "${target}" _name)
  set(_file "${_dir}/locus_runtime/${_name}.cpp")
  file(CONFIGURE OUTPUT "${_file}" CONTENT [=[
// Generated by locus_separate_runtime(@target@): locus's run-time part, compiled once for the target.
#define LOCUS_RUNTIME_IMPLEMENTATION
#include <locus/runtime.hpp>
]=] @ONLY)
  target_sources(${target} PRIVATE "${_file}")
  target_compile_definitions(${target} PRIVATE LOCUS_SEPARATE_RUNTIME=1)
  set(_properties SKIP_PRECOMPILE_HEADERS ON SKIP_UNITY_BUILD_INCLUSION ON)
  if(_kind STREQUAL "cuda")
    list(APPEND _properties LANGUAGE CUDA)
  endif()
  set_source_files_properties("${_file}" TARGET_DIRECTORY ${target} PROPERTIES ${_properties})
  set_target_properties(${target} PROPERTIES LOCUS_SEPARATE_RUNTIME_FILE "${_file}")
endfunction()

# A BLAS with the CBLAS interface (OpenBLAS on Debian) for host matrix products; without one,
# locus uses its own blocked loop. LOCUS_USE_BLAS=OFF forces the loop.
function(locus_find_cblas out)
  set(${out} "" PARENT_SCOPE)
  if(DEFINED LOCUS_USE_BLAS AND NOT LOCUS_USE_BLAS)
    return()
  endif()
  # With OpenMP, OpenBLAS's OpenMP build shares libgomp's threads; its pthread build spins in
  # sched_yield against them (measured: a training step 2x slower on 2 cores). Debian installs
  # the variants side by side (libopenblas-openmp-dev); the build tree gets its directory as RPATH.
  if(TARGET OpenMP::OpenMP_CXX AND NOT DEFINED BLA_VENDOR)
    find_library(LOCUS_OPENBLAS_OPENMP NAMES openblas NO_DEFAULT_PATH
                 PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp /usr/lib64/openblas-openmp)
    if(LOCUS_OPENBLAS_OPENMP)
      set(BLAS_FOUND TRUE)
      set(BLAS_LIBRARIES ${LOCUS_OPENBLAS_OPENMP})
    endif()
  endif()
  if(NOT BLAS_FOUND AND NOT DEFINED BLA_VENDOR)
    set(BLA_VENDOR OpenBLAS)
    find_package(BLAS QUIET)
    unset(BLA_VENDOR)
  endif()
  if(NOT BLAS_FOUND)
    find_package(BLAS QUIET)
  endif()
  if(NOT BLAS_FOUND)
    return()
  endif()
  include(CheckCXXSourceCompiles)
  include(CMakePushCheckState)
  cmake_push_check_state(RESET)
  set(CMAKE_REQUIRED_LIBRARIES ${BLAS_LIBRARIES})
  set(CMAKE_REQUIRED_QUIET ON)
  check_cxx_source_compiles([[
    extern "C" void cblas_sgemm(int, int, int, int, int, int, float, const float*, int, const float*, int, float,
                                float*, int);
    int main() { float a = 1, b = 1, c = 0; cblas_sgemm(101, 111, 111, 1, 1, 1, 1.f, &a, 1, &b, 1, 0.f, &c, 1);
                 return c == 1.f ? 0 : 1; }]] LOCUS_BLAS_HAS_CBLAS)
  cmake_pop_check_state()
  if(LOCUS_BLAS_HAS_CBLAS)
    set(${out} ${BLAS_LIBRARIES} PARENT_SCOPE)
  endif()
endfunction()
