// concat joins operands of one element type: the result has one type.
// expect: locus: concat<Axis>(a, b, ...): the operands must have the same element type
#include <locus/locus.hpp>
int main() {
  const locus::tensor<float, locus::cpu, 2> a(locus::shape{2, 2}, 1.f);
  const locus::tensor<double, locus::cpu, 2> b(locus::shape{2, 2}, 2.0);
#ifdef LOCUS_FIXED
  locus::tensor<float, locus::cpu, 2> c = locus::concat<1>(a, locus::cast<float>(b));
#else
  locus::tensor<float, locus::cpu, 2> c = locus::concat<1>(a, b);
#endif
  return static_cast<int>(c.size()) - 8;
}
