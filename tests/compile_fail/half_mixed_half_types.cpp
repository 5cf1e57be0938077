// half and bfloat16 do not mix either: one of them is converted, by a cast the program writes. (The
// bfloat16 rule is checked first: Clang reports only the first failed assertion of a class.)
// expect: locus: an expression mixes bfloat16 operands with operands of another element type
// variant: host
#include <locus/locus.hpp>
int main() {
  locus::tensor<locus::half, locus::cpu> h(locus::shape<1>{2}, locus::half(1.f));
  locus::tensor<locus::bfloat16, locus::cpu> b(locus::shape<1>{2}, locus::bfloat16(1.f));
#ifdef LOCUS_FIXED
  locus::tensor<locus::half, locus::cpu> s = h * locus::cast<locus::half>(b);
#else
  locus::tensor<locus::half, locus::cpu> s = h * b;
#endif
  return static_cast<int>(s.size()) - 2;
}
