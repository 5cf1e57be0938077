// A device listed twice in data_parallel's device list.
// expect: locus: data_parallel<Policy, Devices...>: a device appears twice in the list
#include <locus/train/data_parallel.hpp>
#include <locus/train/mlp.hpp>
#include <locus/train/softmax_regression.hpp>
int main() {
  locus::train::mlp<float> model({4, 3}, 1);
#ifdef LOCUS_FIXED
  locus::train::data_parallel<locus::train::sync_average, locus::gpu<0>, locus::gpu<1>> trainer{model, {}};
#else
  locus::train::data_parallel<locus::train::sync_average, locus::gpu<0>, locus::gpu<0>> trainer{model, {}};
#endif
  return static_cast<int>(trainer.parameter_count()) - 15;
}
