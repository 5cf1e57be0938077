// Assigning a float expression to a double tensor needs an explicit cast.
// expect: locus: assignment: the expression's element type differs from the destination's; convert explicitly with locus::cast<T>(expr)
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::cpu> a{1.f};
#ifdef LOCUS_FIXED
  locus::tensor<double, locus::cpu> d = locus::cast<double>(a * 2.f);
#else
  locus::tensor<double, locus::cpu> d = a * 2.f;
#endif
  return static_cast<int>(d.size()) - 1;
}
