// A separate-runtime program's runtime file defines LOCUS_RUNTIME_IMPLEMENTATION before its first
// locus header: defined after one, it would compile none of the run-time part (and the program
// would fail to link with undefined registry and log functions). Refused with the fix instead,
// also when the file is compiled without LOCUS_SEPARATE_RUNTIME (as here), where the header before
// the macro made every definition an unused inline function.
// expect: a locus header was included before LOCUS_RUNTIME_IMPLEMENTATION was defined; define it first
// variant: host
#ifdef LOCUS_FIXED
#  define LOCUS_RUNTIME_IMPLEMENTATION
#  include <locus/tensor/shape.hpp>
#else
#  include <locus/tensor/shape.hpp>
#  define LOCUS_RUNTIME_IMPLEMENTATION
#endif
#include <locus/runtime.hpp>
#include <locus/locus.hpp>

int main() {
  const locus::tensor<float, locus::cpu> t{1.f, 2.f};
  return locus::on<locus::cpu>(t * 2.f).size() == 2 ? 0 : 1;
}
