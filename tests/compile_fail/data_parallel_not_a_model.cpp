// Training something that does not meet the model interface (here: no predict).
// expect: locus: data_parallel: the model does not meet the model interface on every device of the list (see locus::train::model_on<M, D> in locus/train/model.hpp)
#include <locus/train/data_parallel.hpp>
#include <locus/train/mlp.hpp>
#include <locus/train/softmax_regression.hpp>

struct half_a_model : locus::train::softmax_regression<float> {
  using softmax_regression::softmax_regression;
#ifndef LOCUS_FIXED
  void predict() const {}  // hides the real one: not a model any more
#endif
};

int main() {
  half_a_model model(4, 3);
  locus::train::data_parallel<locus::train::hogwild, locus::cpu, locus::gpu<0>> trainer{model, {}};
  return static_cast<int>(trainer.parameter_count()) - 15;
}
