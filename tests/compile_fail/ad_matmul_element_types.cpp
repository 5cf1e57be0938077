// ad::matmul of a float and a bfloat16 operand names the cast to write, in one message (no cascade
// from the product's code).
// expect: locus: matmul(A, B): A and B must have the same element type: cast one
// variant: host
#include <locus/ad/ad.hpp>
int main() {
  using locus::bfloat16;
  const locus::tensor<bfloat16, locus::cpu, 2> w(locus::shape{3, 2}, bfloat16(0.5f));
  const locus::tensor<float, locus::cpu, 2> x(locus::shape{4, 3}, 1.f);
  auto loss = [](auto& p, const auto& rows) {
#ifdef LOCUS_FIXED
    return locus::ad::sum(locus::cast<float>(matmul(locus::cast<bfloat16>(rows), p)));
#else
    return locus::ad::sum(locus::cast<float>(matmul(rows, p)));
#endif
  };
  return locus::ad::grad(loss, w, x).size() != 6;
}
