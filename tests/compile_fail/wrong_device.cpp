// on<gpu<1>>(x + y) with x on gpu<0>.
// expect: locus: an operand lives on gpu<0> but the expression is bound to gpu<1>; copy it first with locus::to<gpu<1>>(x), or opt in with on<gpu<1>, locus::implicit_transfers>(expr)
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::gpu<0>> x{1.f};
  locus::tensor<float, locus::gpu<1>> y{1.f};
#ifdef LOCUS_FIXED
  auto z = locus::on<locus::gpu<1>>(locus::to<locus::gpu<1>>(x) + y);
#else
  auto z = locus::on<locus::gpu<1>>(x + y);
#endif
  return static_cast<int>(z.size()) - 1;
}
