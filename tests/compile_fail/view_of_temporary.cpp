// A view does not own its elements: a view of a temporary tensor would dangle.
// expect: locus: row(i) of a temporary tensor would dangle
// expect: locus: reshape of a temporary tensor would dangle
#include <locus/locus.hpp>
locus::tensor<float, locus::cpu, 2> make() { return locus::tensor<float, locus::cpu, 2>(locus::shape{2, 2}, 1.f); }
int main() {
#ifdef LOCUS_FIXED
  auto m = make();
  auto r = m.row(0);
  auto f = locus::reshape(m, locus::shape{4});
#else
  auto r = make().row(0);
  auto f = locus::reshape(make(), locus::shape{4});
#endif
  return static_cast<int>(r.size() + f.size()) - 6;
}
