// on<gpu<0>>(relu(matmul(x, W) + b)) with W on gpu<1>: an operand of a staged product counts like
// any other operand.
// expect: locus: an operand lives on gpu<1> but the expression is bound to gpu<0>; copy it first with locus::to<gpu<0>>(x), or opt in with on<gpu<0>, locus::implicit_transfers>(expr)
#include <locus/locus.hpp>
int main() {
  locus::tensor<float, locus::gpu<0>, 2> x(locus::shape{2, 3}, 1.f);
  locus::tensor<float, locus::gpu<1>, 2> w(locus::shape{3, 2}, 1.f);
  locus::tensor<float, locus::gpu<0>> b(locus::shape{2}, 0.f);
#ifdef LOCUS_FIXED
  auto y = locus::on<locus::gpu<0>>(relu(matmul(x, locus::to<locus::gpu<0>>(w)) + b));
#else
  auto y = locus::on<locus::gpu<0>>(relu(matmul(x, w) + b));
#endif
  return static_cast<int>(y.size()) - 4;
}
