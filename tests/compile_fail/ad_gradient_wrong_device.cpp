// A gradient flows only within a device: differentiating an expression that reads a parameter on
// gpu<0> and a tensor on gpu<1> is the same compile error as evaluating it.
// expect: locus: an operand lives on gpu<1> but the expression is bound to gpu<0>; copy it first with locus::to<gpu<0>>(x), or opt in with on<gpu<0>, locus::implicit_transfers>(expr)
#include <locus/ad/ad.hpp>
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::gpu<0>> w(locus::shape{3}, 1.f);
  locus::tensor<float, locus::gpu<1>> x(locus::shape{3}, 2.f);
#ifdef LOCUS_FIXED
  const auto xs = locus::to<locus::gpu<0>>(x);
#else
  const auto& xs = x;
#endif
  auto g = locus::ad::grad([&](auto& v) { return sum(v * xs); }, w);
  static_assert(std::is_same_v<decltype(g), locus::tensor<float, locus::gpu<0>>>);
  return g.to_vector()[0] == 2.f ? 0 : 1;
}
