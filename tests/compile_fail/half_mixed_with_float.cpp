// A bfloat16 operand beside a float one needs an explicit cast: which precision the result has is
// the program's choice, not a silent promotion.
// expect: locus: an expression mixes bfloat16 operands with operands of another element type: write the conversion, cast<float>(x) on the bfloat16 one (computed and stored in float) or cast<bfloat16>(y) on the other (stored in bfloat16)
#include <locus/locus.hpp>
int main() {
  locus::tensor<locus::bfloat16, locus::cpu> h(locus::shape<1>{2}, locus::bfloat16(1.f));
  locus::tensor<float, locus::cpu> f{1.f, 2.f};
#ifdef LOCUS_FIXED
  locus::tensor<float, locus::cpu> s = locus::cast<float>(h) + f;
#else
  auto s = locus::on<locus::cpu>(h + f);
#endif
  return static_cast<int>(s.size()) - 2;
}
