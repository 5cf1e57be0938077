# Helpers for the project's own tests and examples (never installed).
include_guard(GLOBAL)

find_package(Catch2 CONFIG REQUIRED)
include(Catch)

# MPI (optional): the MPI tests, and the training example runs under mpirun. Not under the
# sanitizers (OpenMPI's own allocations and threads are not theirs to judge).
if(LOCUS_WITH_MPI AND NOT LOCUS_SANITIZE)
  find_package(MPI COMPONENTS CXX)
  if(NOT MPI_CXX_FOUND)
    message(STATUS "locus: MPI not found (apt-get install libopenmpi-dev openmpi-bin): no MPI tests")
  endif()
endif()
# The launcher of an N-rank test: mpirun -np N, oversubscribed (CI has 2 cores); OpenMPI refuses
# to run as root unless told, which CI is.
function(locus_mpi_test name ranks)
  add_test(NAME ${name} COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} --oversubscribe
                                ${MPIEXEC_PREFLAGS} ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT 300 RUN_SERIAL TRUE
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;LOCUS_EMULATED_GPUS=2;LOCUS_LOG_DEVICE_PLACEMENT=0")
endfunction()

# Flags of the project's own code: warnings as errors, sanitizers when asked.
function(locus_project_flags tgt)
  get_target_property(_srcs ${tgt} SOURCES)
  if(LOCUS_ENABLE_CUDA)
    set_source_files_properties(${_srcs} TARGET_DIRECTORY ${tgt} PROPERTIES LANGUAGE CUDA)
    target_compile_options(${tgt} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Wall,-Wextra>)
  else()
    target_compile_options(${tgt} PRIVATE -Wall -Wextra -Wpedantic -Werror)
  endif()
  if(LOCUS_SANITIZE)
    list(JOIN LOCUS_SANITIZE "," _san)
    target_compile_options(${tgt} PRIVATE -fsanitize=${_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    target_link_options(${tgt} PRIVATE -fsanitize=${_san})
    # GCC 12's -Wmaybe-uninitialized misfires through std::optional<unique_ptr> under ASan's
    # instrumentation (data_parallel's replica set): a false positive, not a finding.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${tgt} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
    endif()
  endif()
endfunction()

# The variant a test binary is built for: host (cpu only), emulated (LOCUS_EMULATE_GPUS=1), cuda.
function(locus_variant_definitions tgt variant)
  if(variant STREQUAL "emulated")
    target_compile_definitions(${tgt} PRIVATE LOCUS_EMULATE_GPUS=1)
  endif()
endfunction()

function(locus_link_catch2 tgt)
  if(Catch2_VERSION VERSION_GREATER_EQUAL 3)
    target_link_libraries(${tgt} PRIVATE Catch2::Catch2WithMain)
  elseif(TARGET Catch2::Catch2WithMain)
    target_link_libraries(${tgt} PRIVATE Catch2::Catch2WithMain)
    target_compile_definitions(${tgt} PRIVATE LOCUS_CATCH2_V2)
  else()
    target_sources(${tgt} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common/catch_main_v2.cpp)
    target_link_libraries(${tgt} PRIVATE Catch2::Catch2)
    target_compile_definitions(${tgt} PRIVATE LOCUS_CATCH2_V2)
  endif()
endfunction()

# The variants this build makes: host (cpu only) and emulated (LOCUS_EMULATE_GPUS=1) without CUDA,
# cuda with it. Compile-fail and header checks cost a compile each; sanitizer builds skip them.
if(LOCUS_ENABLE_CUDA)
  set(LOCUS_TEST_VARIANTS cuda)
else()
  set(LOCUS_TEST_VARIANTS "host;emulated" CACHE STRING "Test variants to build: host, emulated")
endif()
option(LOCUS_BUILD_COMPILE_CHECKS "Compile-fail tests and header self-containment checks" ON)
# The header checks compile each public header alone; one compiler is enough to find a missing
# include (the presets run them under clang: ~180 CPU s a stage).
option(LOCUS_BUILD_HEADER_CHECKS "With LOCUS_BUILD_COMPILE_CHECKS: the header self-containment checks" ON)
# Only the test files with tests that use threads (the tsan preset: its tests are those, and the
# other files cost most of its build).
option(LOCUS_TEST_THREADS_ONLY "Test targets compile only the files whose tests use threads" OFF)
# Run the CUDA tests (only where a GPU is present; CI compiles them without running).
option(LOCUS_RUN_GPU_TESTS "Register the CUDA tests with CTest" OFF)
