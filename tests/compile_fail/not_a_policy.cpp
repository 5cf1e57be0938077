// A type that is not a training policy in data_parallel's first place (here: the optimiser).
// expect: locus: data_parallel<Policy, ...>: Policy is not a training policy
#include <locus/train/data_parallel.hpp>
#include <locus/train/mlp.hpp>
#include <locus/train/softmax_regression.hpp>
int main() {
  locus::train::mlp<float> model({4, 3}, 1);
#ifdef LOCUS_FIXED
  locus::train::data_parallel<locus::train::local_sgd, locus::cpu> trainer{model, {}};
#else
  locus::train::data_parallel<locus::train::sgd, locus::cpu> trainer{model, {}};
#endif
  return static_cast<int>(trainer.parameter_count()) - 15;
}
