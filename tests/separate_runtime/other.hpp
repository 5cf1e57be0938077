#pragma once
#include <locus/locus.hpp>

#include <cstddef>

namespace other {
locus::tensor<float, locus::gpu<1>> doubled_on_gpu1(const locus::tensor<float, locus::gpu<1>>& x);
int gpus_seen();
std::size_t launches_on_gpu1();
void mismatched_sum();
}  // namespace other
