// slice<Axis> names an axis of the tensor: a rank-2 tensor has axes 0 and 1.
// expect: locus: slice<Axis>(t, first, last): Axis must be 0 to the tensor's rank - 1
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::cpu, 2> m(locus::shape{3, 2}, 1.f);
#ifdef LOCUS_FIXED
  auto v = locus::slice<0>(m, 0, 2);
#else
  auto v = locus::slice<2>(m, 0, 2);
#endif
  return static_cast<int>(v.size()) - 4;
}
