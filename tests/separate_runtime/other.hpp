#pragma once
#include <locus/locus.hpp>

#include <cstddef>
#include <string>

namespace other {
locus::tensor<float, locus::gpu<1>> doubled_on_gpu1(const locus::tensor<float, locus::gpu<1>>& x);
int gpus_seen();
std::size_t launches_on_gpu1();
void mismatched_sum();
/// The parameter count of the checkpoint at `path` (read by the runtime's checkpoint reader).
std::size_t checkpoint_parameters(const std::string& path);
}  // namespace other
