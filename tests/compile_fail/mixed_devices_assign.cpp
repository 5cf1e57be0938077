// An expression that mixes devices, assigned without on<>: checked against the destination.
// expect: locus: an operand lives on gpu<0> but the expression is bound to gpu<1>
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::gpu<0>> x{1.f};
  locus::tensor<float, locus::gpu<1>> y{1.f};
#ifdef LOCUS_FIXED
  locus::tensor<float, locus::gpu<1>> c = locus::to<locus::gpu<1>>(x) + y;
#else
  locus::tensor<float, locus::gpu<1>> c = x + y;
#endif
  return static_cast<int>(c.size()) - 1;
}
