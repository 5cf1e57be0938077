// A host tensor in an expression bound to a GPU.
// expect: locus: an operand lives on cpu but the expression is bound to gpu<0>
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::cpu> h{1.f};
  locus::tensor<float, locus::gpu<0>> x{1.f};
#ifdef LOCUS_FIXED
  auto z = locus::on<locus::gpu<0>>(x * locus::to<locus::gpu<0>>(h));
#else
  auto z = locus::on<locus::gpu<0>>(x * h);
#endif
  return static_cast<int>(z.size()) - 1;
}
