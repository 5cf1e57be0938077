// softmax_cross_entropy computes in float or double: differentiating it on 16-bit logits names the
// cast to write.
// expect: locus: softmax_cross_entropy takes float or double logits: cast 16-bit ones first
// variant: host
#include <locus/ad/ad.hpp>
int main() {
  using locus::bfloat16;
  const locus::tensor<bfloat16, locus::cpu, 2> w(locus::shape{3, 2}, bfloat16(0.5f)), x(locus::shape{4, 3}, bfloat16(1.f));
  const locus::tensor<std::int32_t, locus::cpu> y(locus::shape{4}, 1);
  auto loss = [](auto& p, const auto& rows, const auto& labels) {
#ifdef LOCUS_FIXED
    return softmax_cross_entropy(locus::cast<float>(matmul(rows, p)), labels);
#else
    return softmax_cross_entropy(matmul(rows, p), labels);
#endif
  };
  return locus::ad::grad(loss, w, x, y).size() != 6;
}
