// Element access is for the cpu, through views as through tensors.
// expect: locus: element access t(i, ...) is for cpu tensors
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::gpu<0>, 2> m{{1.f, 2.f}, {3.f, 4.f}};
#ifdef LOCUS_FIXED
  return static_cast<int>(locus::to<locus::cpu>(m.row(1))(0)) - 3;
#else
  return static_cast<int>(m.row(1)(0)) - 3;
#endif
}
