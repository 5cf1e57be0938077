// Every CPU is the one host device "/cpu:0": there is no cpu<1>.
// expect-gcc: 'locus::cpu' is not a template
// expect-clang: expected '>'
#include <locus/locus.hpp>
int main() {
#ifdef LOCUS_FIXED
  locus::tensor<float, locus::cpu> t{1.f};
#else
  locus::tensor<float, locus::cpu<1>> t{1.f};
#endif
  return static_cast<int>(t.size()) - 1;
}
