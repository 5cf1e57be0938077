// float16 training needs dynamic loss scaling, which locus does not have: mixed<half> is refused at
// compile time, naming bfloat16 (no scaling needed) as the way.
// expect: locus: mixed_precision<half, M>: float16 training needs dynamic loss scaling
// variant: host
#include <locus/train/mixed_precision.hpp>
int main() {
  namespace train = locus::train;
  namespace nn = locus::train::nn;
  const train::sequential mlp{nn::dense(4, 8), nn::relu, nn::dense(8, 2)};
#ifdef LOCUS_FIXED
  const auto model = train::mixed<locus::bfloat16>(mlp);
#else
  const auto model = train::mixed<locus::half>(mlp);
#endif
  const auto p = model.init<locus::cpu>();
  const locus::tensor<float, locus::cpu, 2> x(locus::shape{2, 4}, 1.f);
  const locus::tensor<std::int32_t, locus::cpu> y(locus::shape{2}, 1);
  return model.loss_and_grad(p, x, y).loss.item() < 0.f;
}
