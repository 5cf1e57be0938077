// A loss of float targets compares outputs [rows, k] with targets [rows, k]: a forward that returns
// one value per row (rank 1) is refused with the shape to return, not a template cascade.
// expect: locus: a loss of float targets compares the model's output with targets [rows, k]: the output must be rank 2
// variant: host
#include <locus/train/layers.hpp>
int main() {
  namespace train = locus::train;
  namespace nn = locus::train::nn;
  train::functional model{train::parameters{nn::glorot(4, 1), nn::zeros(1)},
                          [](const auto& p, const auto& x) {
                            const auto& [w, b] = p;
#ifdef LOCUS_FIXED
                            return matmul(x, w) + b;  // [rows, 1]
#else
                            return sum<1>(matmul(x, w) + b);  // [rows]
#endif
                          },
                          train::losses::mean_squared_error};
  const auto p = model.init<locus::cpu>();
  const locus::tensor<float, locus::cpu, 2> x(locus::shape{2, 4}, 1.f), t(locus::shape{2, 1}, 0.5f);
  return model.loss_and_grad(p, x, t).loss.item() < 0.f;
}
