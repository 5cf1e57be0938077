// A view is a pointer and a shape: only slices of axis 0 (rows) are contiguous.
// expect: locus: slice<Axis>(t, first, last): only slices of axis 0 are views
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::cpu, 2> m(locus::shape{3, 2}, 1.f);
#ifdef LOCUS_FIXED
  auto v = locus::slice<0>(m, 0, 2);
#else
  auto v = locus::slice<1>(m, 0, 2);
#endif
  return static_cast<int>(v.size()) - 4;
}
