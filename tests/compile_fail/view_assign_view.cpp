// `t.row(0) = t.row(1)` would rebind a temporary view and write nothing; element copies are explicit.
// expect: locus: view = tensor or view: element copies are explicit
// expect-gcc: use of deleted function
// expect-clang: overload resolution selected deleted operator '='
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::cpu, 2> m{{1.f, 2.f}, {3.f, 4.f}};
  locus::tensor<float, locus::cpu> r{5.f, 6.f};
#ifdef LOCUS_FIXED
  m.row(0) = locus::copy(m.row(1));
  m.row(1) = locus::copy(r);
#else
  m.row(0) = m.row(1);
  m.row(1) = r;
#endif
  return static_cast<int>(m(0, 0) + m(1, 0)) - 8;
}
