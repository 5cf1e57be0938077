#pragma once
// locus: tensors whose device is part of their type, fused expressions, placement checked at
// compile time. The umbrella header: include this one.
#include <locus/config.hpp>
#include <locus/version.hpp>
#include <locus/errors.hpp>
#include <locus/device/device.hpp>
#include <locus/log.hpp>
#include <locus/backend/registry.hpp>
#include <locus/backend/memory.hpp>
#include <locus/backend/parallel.hpp>
#include <locus/tensor/shape.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/tensor/transfer.hpp>
#include <locus/tensor/slice.hpp>
#include <locus/tensor/print.hpp>
#include <locus/expr/node.hpp>
#include <locus/expr/ops.hpp>
#include <locus/expr/operators.hpp>
#include <locus/placement/policy.hpp>
#include <locus/placement/kernel.hpp>
#include <locus/placement/on.hpp>
#include <locus/placement/dispatch.hpp>
#include <locus/ops/reduce.hpp>
#include <locus/ops/matmul.hpp>
#include <locus/ops/nn.hpp>
#include <locus/ops/random.hpp>
#include <locus/data/idx.hpp>
