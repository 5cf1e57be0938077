// on<D> with something that is not a device tag.
// expect: locus: on<D>(expr): D must be a device tag, locus::cpu or locus::gpu<N>
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::cpu> a{1.f};
#ifdef LOCUS_FIXED
  auto z = locus::on<locus::cpu>(a * 2.f);
#else
  auto z = locus::on<int>(a * 2.f);
#endif
  return static_cast<int>(z.size()) - 1;
}
