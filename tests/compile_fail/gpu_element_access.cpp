// Element access exists only for tensors on the cpu.
// expect: locus: element access t(i, ...) is for cpu tensors
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::gpu<0>> x{1.f};
#ifdef LOCUS_FIXED
  return static_cast<int>(locus::to<locus::cpu>(x)(0)) - 1;
#else
  return static_cast<int>(x(0)) - 1;
#endif
}
