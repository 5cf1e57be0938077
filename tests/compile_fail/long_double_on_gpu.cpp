// long double has no GPU kernels (device code has no long double).
// expect: locus: Could not satisfy explicit device specification '/device:GPU:1' because no supported kernel for GPU devices is available
#include <locus/locus.hpp>
int main() {
  locus::tensor<long double, locus::gpu<1>> x{1.0L};
#ifdef LOCUS_FIXED
  auto z = locus::on<locus::gpu<1>, locus::soft_placement>(x + x);
#else
  auto z = locus::on<locus::gpu<1>>(x + x);
#endif
  return static_cast<int>(z.size()) - 1;
}
