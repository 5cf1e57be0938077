#pragma once
// The run-time part of locus in one place: the device registry and its caching arenas, the
// placement log and its ledger, the messages of their errors, the IDX and checkpoint readers and
// writers, and the non-template parts of training (its checks, progress lines, replica threads).
// Header-only programs never include this (every header defines what it uses, inline). A program
// built with LOCUS_SEPARATE_RUNTIME=1 (config.hpp) compiles it once, in a source file of its own
// (CMake: locus_separate_runtime(<target>), cmake/locusBackend.cmake):
//
//     // locus_runtime.cpp: the only file that defines LOCUS_RUNTIME_IMPLEMENTATION
//     #define LOCUS_RUNTIME_IMPLEMENTATION
//     #include <locus/runtime.hpp>
//
// compiled with the same configuration as the program's other files (LOCUS_EMULATE_GPUS, nvcc or
// not); the other files then compile only calls into it.
#include <locus/config.hpp>
#if defined(LOCUS_RUNTIME_IMPLEMENTATION) && !defined(LOCUS_DETAIL_RUNTIME_IMPLEMENTATION_SEEN)
#  error "locus/runtime.hpp: a locus header was included before LOCUS_RUNTIME_IMPLEMENTATION was defined; define it first"
#endif
// Every header that defines a part of the run-time (its definitions under
// `#if LOCUS_RUNTIME_DEFINITIONS`); tests/separate_runtime/check_runtime_header.cmake checks that none
// is missing.
#include <locus/backend/caching_allocator.hpp>
#include <locus/backend/pool.hpp>
#include <locus/backend/registry.hpp>
#include <locus/data/dataset.hpp>
#include <locus/data/idx.hpp>
#include <locus/device/device.hpp>
#include <locus/dist/communicator.hpp>
#include <locus/errors.hpp>
#include <locus/expr/node.hpp>
#include <locus/log.hpp>
#include <locus/ops/matmul.hpp>
#include <locus/placement/on.hpp>
#include <locus/tensor/shape.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/tensor/transfer.hpp>
#include <locus/train/checkpoint.hpp>
#include <locus/train/data_parallel.hpp>
#include <locus/train/mlp.hpp>
#include <locus/train/model.hpp>
#include <locus/train/optimizer.hpp>
#include <locus/train/replicas.hpp>
#include <locus/train/report.hpp>
#include <locus/train/runner.hpp>
#include <locus/train/softmax_regression.hpp>

#if defined(LOCUS_RUNTIME_IMPLEMENTATION)
namespace locus::detail {
// Named for the linker: a program that compiles the run-time part twice (a runtime file in a
// library and another in the executable) fails to link with this name among the duplicates.
void the_separate_runtime_is_compiled_once_per_program();
void the_separate_runtime_is_compiled_once_per_program() {}
}  // namespace locus::detail
#endif
