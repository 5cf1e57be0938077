// A policy carries its own options: lookahead is hogwild's, so sync_average{.lookahead = true}
// is a compile error (it used to be a run-time config_error).
// expect-gcc: has no non-static data member named 'lookahead'
// expect-clang: field designator 'lookahead' does not refer to any field
#include <locus/train/data_parallel.hpp>
#include <locus/train/mlp.hpp>
#include <locus/train/softmax_regression.hpp>
int main() {
  locus::train::mlp<float> model({4, 3}, 1);
#ifdef LOCUS_FIXED
  locus::train::data_parallel<locus::train::hogwild, locus::cpu> trainer{model, {}, locus::train::hogwild{.lookahead = true}};
#else
  locus::train::data_parallel<locus::train::sync_average, locus::cpu> trainer{model, {}, locus::train::sync_average{.lookahead = true}};
#endif
  return static_cast<int>(trainer.parameter_count()) - 15;
}
