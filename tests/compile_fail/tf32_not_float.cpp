// TF32 is a mode of float products: asking for it on double (or 16-bit) operands is refused.
// expect: locus: matmul(a, b, tf32): TF32 is a mode of float products; the operands must be float
// variant: host
#include <locus/locus.hpp>
int main() {
#ifdef LOCUS_FIXED
  locus::tensor<float, locus::cpu, 2> a{{1.f, 2.f}, {3.f, 4.f}};
#else
  locus::tensor<double, locus::cpu, 2> a{{1.0, 2.0}, {3.0, 4.0}};
#endif
  auto c = locus::on<locus::cpu>(locus::matmul(a, a, locus::tf32));
  return static_cast<int>(c.size()) - 4;
}
