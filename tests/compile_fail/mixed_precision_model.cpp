// mixed<bfloat16>(m) needs a model that runs its forward pass on 16-bit values (sequential,
// functional): a model with its own float kernels is refused by name, not by a template cascade.
// expect: locus: mixed_precision<H, M>: M must run its forward pass on 16-bit values
// variant: host
#include <locus/train/mixed_precision.hpp>
#include <locus/train/softmax_regression.hpp>
int main() {
  namespace train = locus::train;
  namespace nn = locus::train::nn;
#ifdef LOCUS_FIXED
  const auto model = train::mixed<locus::bfloat16>(train::sequential{nn::dense(4, 2)});
#else
  const auto model = train::mixed<locus::bfloat16>(train::softmax_regression<float>(4, 2));
#endif
  const auto p = model.init<locus::cpu>();
  return static_cast<int>(model.classes()) - 2;
}
