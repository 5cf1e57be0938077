#pragma once
// Build configuration, included first by every locus header.
//
//   LOCUS_HAS_CUDA      1 when the translation unit is compiled by nvcc: gpu<N> runs on real GPUs.
//   LOCUS_EMULATE_GPUS  define to 1 (CMake option LOCUS_EMULATE_GPUS) in a build without CUDA to get
//                       emulated GPUs: host memory, one arena per index, every log line marked.
//   LOCUS_HAS_GPUS      1 when gpu<N> may be named at all.
//
// In a CUDA build every translation unit that includes locus must be compiled by nvcc; mixing
// nvcc and g++ translation units would give the same inline functions two definitions.
#include <locus/version.hpp>

#if defined(__CUDACC__)
#  define LOCUS_HAS_CUDA 1
#  define LOCUS_HOST_DEVICE __host__ __device__
// Host-device templates that may wrap a user's host-only function object (map() with host_only,
// run through soft placement on the cpu): nvcc must not reject the host-only instantiation.
#  define LOCUS_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
#else
#  define LOCUS_HAS_CUDA 0
#  define LOCUS_HOST_DEVICE
#  define LOCUS_EXEC_CHECK_DISABLE
#endif

#if !defined(LOCUS_EMULATE_GPUS)
#  define LOCUS_EMULATE_GPUS 0
#endif

#if LOCUS_EMULATE_GPUS && LOCUS_HAS_CUDA
#  error "locus: LOCUS_EMULATE_GPUS is for builds without CUDA; an nvcc build runs gpu<N> on real GPUs (configure logical GPUs to get more devices than cards)"
#endif

#define LOCUS_HAS_GPUS (LOCUS_HAS_CUDA || LOCUS_EMULATE_GPUS)

// The run-time part (the device registry, the placement log): header-only by default, compiled
// in every translation unit that uses it. A program of many translation units may instead compile
// it once: define LOCUS_SEPARATE_RUNTIME=1 for all of them and build one more source file that
// defines LOCUS_RUNTIME_IMPLEMENTATION before including <locus/runtime.hpp> (README: "Compile
// time"). LOCUS_RUNTIME_DEFINITIONS says whether this translation unit defines it, and
// LOCUS_RUNTIME_INLINE how.
#if defined(LOCUS_RUNTIME_IMPLEMENTATION)
#  define LOCUS_RUNTIME_DEFINITIONS 1
#  define LOCUS_RUNTIME_INLINE
#  define LOCUS_DETAIL_RUNTIME_IMPLEMENTATION_SEEN 1  // runtime.hpp: the macro came before this header
#elif defined(LOCUS_SEPARATE_RUNTIME) && LOCUS_SEPARATE_RUNTIME
#  define LOCUS_RUNTIME_DEFINITIONS 0
#  define LOCUS_RUNTIME_INLINE
#else
#  define LOCUS_RUNTIME_DEFINITIONS 1
#  define LOCUS_RUNTIME_INLINE inline
#endif
// The common configurations the run-time file also compiles (the built-in models' code for float
// on each kind of device, the optimisers' steps): each header that defines one names it with
//     #ifdef LOCUS_DETAIL_PREBUILT
//     LOCUS_DETAIL_PREBUILT class detail::model_core<mlp<float>, cpu>;
//     #endif
// an explicit instantiation definition in the run-time file, a declaration (`extern template`) in
// the program's other files, which then compile calls into it instead of the code. Header-only
// programs instantiate them where they are used, as any template. (LOCUS_DETAIL_NO_PREBUILT, for
// locus's own link-failure tests, which compile the run-time file several times and never call the
// prebuilt code: every file of such a program defines it, and nothing is prebuilt.)
#if defined(LOCUS_DETAIL_NO_PREBUILT)
#elif defined(LOCUS_RUNTIME_IMPLEMENTATION)
#  define LOCUS_DETAIL_PREBUILT template
#elif defined(LOCUS_SEPARATE_RUNTIME) && LOCUS_SEPARATE_RUNTIME
#  define LOCUS_DETAIL_PREBUILT extern template
#endif
// A run-time function called from many templates (the arena's allocate and deallocate, inside every
// tensor's constructor and destructor): header-only, `inline` would let the optimiser copy its body
// into each of them; it stays one out-of-line function.
#if defined(__GNUC__) || defined(__clang__)
#  define LOCUS_NOINLINE __attribute__((noinline))
#else
#  define LOCUS_NOINLINE
#endif

// The configuration the run-time part is compiled for, in the name of a function that only it
// defines and every user of the registry calls (backend/registry.hpp): a program whose runtime file
// was compiled for another configuration (without LOCUS_EMULATE_GPUS, by g++ beside nvcc files)
// fails to link, naming the configuration it lacks, instead of running with another registry.
#if LOCUS_HAS_CUDA
#  define LOCUS_DETAIL_RUNTIME_CONFIGURATION runtime_configuration_cuda
#elif LOCUS_EMULATE_GPUS
#  define LOCUS_DETAIL_RUNTIME_CONFIGURATION runtime_configuration_emulated_gpus
#else
#  define LOCUS_DETAIL_RUNTIME_CONFIGURATION runtime_configuration_host
#endif

// Host builds evaluate through Thrust's OpenMP system (sequential CPP system without OpenMP).
// The device system must be known before the first Thrust header; locus always passes explicit
// execution policies, so this only keeps Thrust's generic headers away from CUDA.
#if !LOCUS_HAS_CUDA && !defined(THRUST_DEVICE_SYSTEM)
#  if defined(_OPENMP)
#    define THRUST_DEVICE_SYSTEM 2 /* THRUST_DEVICE_SYSTEM_OMP */
#  else
#    define THRUST_DEVICE_SYSTEM 4 /* THRUST_DEVICE_SYSTEM_CPP */
#  endif
#endif
