// Tensors are move-only: a copy of device memory is always spelled out.
// expect-gcc: use of deleted function
// expect-clang: call to deleted constructor of 'locus::tensor<float, locus::cpu>'
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
