#include <locus/locus.hpp>

#include <cstdio>

int main() {
  using namespace locus;
  tensor<float, gpu<0>> x{1.f, 2.f};
  auto y = on<gpu<0>>(x * x + 1.f).to_vector();
  std::printf("locus %d: %g %g\n", LOCUS_VERSION, y[0], y[1]);
  return y[0] == 2.f && y[1] == 5.f ? 0 : 1;
}
