// An operation without a GPU kernel placed on a GPU, without soft placement.
// expect: locus: Could not satisfy explicit device specification '/device:GPU:0' because no supported kernel for GPU devices is available
#include <locus/locus.hpp>
#include <cmath>
struct bessel_j0 {
  static constexpr bool host_only = true;
  float operator()(float x) const { return static_cast<float>(std::cyl_bessel_j(0.0, static_cast<double>(x))); }
};
int main() {
  locus::tensor<float, locus::gpu<0>> x{1.f};
#ifdef LOCUS_FIXED
  auto z = locus::on<locus::gpu<0>, locus::soft_placement>(locus::map(bessel_j0{}, x));
#else
  auto z = locus::on<locus::gpu<0>>(locus::map(bessel_j0{}, x));
#endif
  return static_cast<int>(z.size()) - 1;
}
