// conv2d and pooling compute in float or double: 16-bit operands name the cast to write.
// expect: locus: conv2d and pooling take float or double tensors (bfloat16 or half ones: cast<float>(x) first)
// variant: host
#include <locus/locus.hpp>
int main() {
  const locus::tensor<locus::bfloat16, locus::cpu, 4> x(locus::shape{1, 1, 4, 4}, locus::bfloat16(1.f));
  const locus::tensor<float, locus::cpu, 4> w(locus::shape{1, 1, 3, 3}, 1.f);
#ifdef LOCUS_FIXED
  locus::tensor<float, locus::cpu, 4> y = locus::conv2d(locus::cast<float>(x), w);
#else
  locus::tensor<locus::bfloat16, locus::cpu, 4> y = locus::conv2d(x, locus::cast<locus::bfloat16>(w));
#endif
  return static_cast<int>(y.size()) - 4;
}
