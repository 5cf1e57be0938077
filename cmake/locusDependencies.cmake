# CCCL (Thrust, CUB, libcudacxx) comes from the CUDA Toolkit's own CMake package, found without
# relying on nvcc being on PATH. Host builds use the same headers with Thrust's OpenMP system
# (the sequential CPP system where OpenMP is missing).
include_guard(GLOBAL)
include(GNUInstallDirs)

find_package(Thrust 3.0 CONFIG REQUIRED
             HINTS "$ENV{CUDA_PATH}/lib64/cmake" "$ENV{CUDA_HOME}/lib64/cmake" "${CUDAToolkit_ROOT}/lib64/cmake"
                   /usr/local/cuda/lib64/cmake)
find_package(OpenMP COMPONENTS CXX)

if(TARGET OpenMP::OpenMP_CXX)
  set(_locus_host_system OMP)
else()
  set(_locus_host_system CPP)
endif()
if(LOCUS_ENABLE_CUDA)
  thrust_create_target(locus_thrust HOST CPP DEVICE CUDA)
else()
  thrust_create_target(locus_thrust HOST CPP DEVICE ${_locus_host_system})
endif()

# Links target `tgt` to Thrust and, where present, OpenMP (also for nvcc's host compiler).
function(locus_link_backend tgt)
  target_link_libraries(${tgt} INTERFACE locus_thrust)
  if(TARGET OpenMP::OpenMP_CXX AND NOT LOCUS_ENABLE_CUDA)
    target_link_libraries(${tgt} INTERFACE OpenMP::OpenMP_CXX)
  elseif(TARGET OpenMP::OpenMP_CXX)
    # nvcc passes -fopenmp to its host compiler; OpenMP::OpenMP_CXX only knows g++'s spelling.
    target_compile_options(${tgt} INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fopenmp>
                                            $<$<COMPILE_LANGUAGE:CXX>:${OpenMP_CXX_FLAGS}>)
    target_link_libraries(${tgt} INTERFACE ${OpenMP_CXX_LIBRARIES})
  endif()
  if(LOCUS_ENABLE_CUDA)
    # CMake 3.25 believes nvcc 13 already defaults to C++20 and omits the flag: spell it out.
    target_compile_options(${tgt} INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 --expt-relaxed-constexpr>)
  endif()
endfunction()
