// Training with something that does not meet the optimiser concept (here: options and validate(),
// but no state_buffers() or kernel()).
// expect: locus: data_parallel: the optimiser does not meet locus::train::optimizer: it needs a static `name`, `lr`, validate(), state_buffers() and kernel(step_args, tensor_state) (see locus/train/optimizer.hpp; built in: sgd, adam, adamw)
#include <locus/train/data_parallel.hpp>
#include <locus/train/mlp.hpp>

struct rmsprop_sketch {
  static constexpr const char* name = "rmsprop";
  float lr = 0.01f;
  void validate() const {}
};

int main() {
  locus::train::mlp<float> model({4, 3}, 1);
#ifdef LOCUS_FIXED
  locus::train::data_parallel<locus::train::sync_average, locus::cpu> trainer{model, locus::train::adamw{1e-3f}};
#else
  locus::train::data_parallel<locus::train::sync_average, locus::cpu> trainer{model, rmsprop_sketch{}};
#endif
  return static_cast<int>(trainer.parameter_count()) - 15;
}
