// A bool tensor is another element type too: multiplying bfloat16 values by a mask needs the cast
// that says in which type (where(mask, h, 0) needs none: the condition picks, it is not a value).
// expect: locus: an expression mixes bfloat16 operands with operands of another element type
// variant: host
#include <locus/locus.hpp>
int main() {
  locus::tensor<locus::bfloat16, locus::cpu> h(locus::shape<1>{2}, locus::bfloat16(1.f));
  locus::tensor<bool, locus::cpu> mask(locus::shape<1>{2}, true);
#ifdef LOCUS_FIXED
  locus::tensor<locus::bfloat16, locus::cpu> s = locus::where(mask, h, 0);
#else
  locus::tensor<locus::bfloat16, locus::cpu> s = h * mask;
#endif
  return static_cast<int>(s.size()) - 2;
}
