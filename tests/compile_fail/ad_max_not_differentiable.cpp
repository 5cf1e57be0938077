// max<Axis> of an expression of variables has no derivative here: a message says so and names the
// way out (the value as a constant, ad::detach).
// expect: locus: ad: max of an expression of variables has no derivative; reduce ad::detach(x) (its value, a constant) instead
#include <locus/ad/ad.hpp>
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::cpu> w{1.f, 2.f, 3.f};
  auto g = locus::ad::grad([](auto& v) {
#ifdef LOCUS_FIXED
    return sum(exp(v - max(locus::ad::detach(v))));
#else
    return sum(exp(v - max(v)));
#endif
  }, w);
  return g.size() == 3 ? 0 : 1;
}
