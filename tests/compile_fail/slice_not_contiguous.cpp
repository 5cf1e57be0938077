// A view is a pointer and a shape: only slices of axis 0 (rows) are views, and destinations; a
// slice of axis 1 is an operand read through an index map.
// expect: locus: slice<Axis>(t, first, last) with Axis > 0 is an operand, not a destination
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::cpu, 2> m(locus::shape{3, 2}, 1.f);
  const locus::tensor<float, locus::cpu, 2> one(locus::shape{3, 1}, 2.f);
#ifdef LOCUS_FIXED
  m = locus::concat<1>(one, locus::slice<1>(m, 1, 2));
#else
  locus::slice<1>(m, 0, 1) = one;
#endif
  return static_cast<int>(m.size()) - 6;
}
