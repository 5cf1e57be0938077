// eval() of an expression whose operands live on two devices.
// expect: locus: eval(expr): the operands of this expression live on different devices
// expect: locus::gpu<0>, locus::gpu<1>
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::gpu<0>> x{1.f};
  locus::tensor<float, locus::gpu<1>> y{1.f};
#ifdef LOCUS_FIXED
  auto z = locus::on<locus::gpu<1>>(locus::to<locus::gpu<1>>(x) + y);
#else
  auto z = locus::eval(x + y);
#endif
  return static_cast<int>(z.size()) - 1;
}
