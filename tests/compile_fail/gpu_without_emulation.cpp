// A host-only build (no nvcc, no emulation) has no gpu<N>.
// variant: host
// expect: locus: gpu<N> needs a CUDA build (compile with nvcc) or GPU emulation (CMake option LOCUS_EMULATE_GPUS=ON, or define LOCUS_EMULATE_GPUS=1)
#include <locus/locus.hpp>
int main() {
#ifdef LOCUS_FIXED
  locus::tensor<float, locus::cpu> t{1.f};
#else
  locus::tensor<float, locus::gpu<0>> t{1.f};
#endif
  return static_cast<int>(t.size()) - 1;
}
