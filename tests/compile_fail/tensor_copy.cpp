// Tensors are move-only: a copy of device memory is always spelled out.
// expect: use of deleted function
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::cpu> a{1.f};
#ifdef LOCUS_FIXED
  auto b = a.clone();
#else
  auto b = a;
#endif
  return static_cast<int>(b.size()) - 1;
}
