// A second translation unit built with LOCUS_SEPARATE_RUNTIME=1: what it evaluates, allocates and
// logs goes through the same registry, arenas and log as test_separate.cpp's.
#include "other.hpp"

#include <locus/locus.hpp>
#include <locus/train/checkpoint.hpp>

namespace other {

locus::tensor<float, locus::gpu<1>> doubled_on_gpu1(const locus::tensor<float, locus::gpu<1>>& x) {
  return locus::on<locus::gpu<1>>(x * 2.f);
}

int gpus_seen() { return locus::gpu_count(); }

std::size_t launches_on_gpu1() { return locus::kernel_launches(locus::id_of<locus::gpu<1>>); }

void mismatched_sum() {
  const locus::tensor<float, locus::cpu> a{1.f, 2.f, 3.f}, b{1.f, 2.f};
  (void)locus::on<locus::cpu>(a + b);
}

std::size_t checkpoint_parameters(const std::string& path) {
  return locus::train::checkpoint::load(path).parameters.size();
}

}  // namespace other
