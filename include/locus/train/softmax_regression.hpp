#pragma once
// Softmax regression (multinomial logistic regression): logits = x W + b, softmax cross-entropy.
// Written against the model interface of model.hpp the way a user's own model would be: its own
// parameter type with for_each, init, loss_and_grad and predict.
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/ops/matmul.hpp>
#include <locus/ops/nn.hpp>
#include <locus/ops/random.hpp>
#include <locus/ops/reduce.hpp>
#include <locus/placement/on.hpp>
#include <locus/tensor/tensor.hpp>

#include <cstdint>
#include <string>
#include <utility>

namespace locus::train {

template <class T>
class softmax_regression {
public:
  using value_type = T;

  template <device D>
  struct params {
    tensor<T, D, 2> w;  ///< [inputs, classes]
    tensor<T, D, 1> b;  ///< [classes]
    template <class F>
    void for_each(F&& f) {
      f(w.view());
      f(b.view());
    }
    template <class F>
    void for_each(F&& f) const {
      f(w.view());
      f(b.view());
    }
  };

  template <device D>
  struct step {
    tensor<T, D, 0> loss;
    params<D> grad;
  };

  /// Zero weights (the loss is convex: no symmetry to break).
  softmax_regression(std::size_t inputs, std::size_t classes) : inputs_(inputs), classes_(classes) {
    if (inputs == 0 || classes < 2)
      throw shape_error("locus: softmax_regression needs inputs > 0 and at least 2 classes, not " +
                        std::to_string(inputs) + " and " + std::to_string(classes));
  }

  /// Labels lie in [0, classes()).
  [[nodiscard]] std::size_t classes() const { return classes_; }

  template <device D>
  [[nodiscard]] params<D> init() const {
    return {tensor<T, D, 2>(shape{inputs_, classes_}, T(0)), tensor<T, D, 1>(shape{classes_}, T(0))};
  }

  template <device D>
  [[nodiscard]] step<D> loss_and_grad(const params<D>& p, const tensor<T, D, 2>& x,
                                      const tensor<std::int32_t, D>& y) const {
    check(x);
    auto logits = dense_forward(x, p.w, p.b);
    auto [loss, dy] = softmax_cross_entropy(logits, y);
    auto d = dense_backward(x, p.w, dy, /*input_gradient=*/false);
    return {std::move(loss), {std::move(d.dw), std::move(d.db)}};
  }

  template <device D>
  [[nodiscard]] tensor<std::int64_t, D> predict(const params<D>& p, const tensor<T, D, 2>& x) const {
    check(x);
    return on<D>(argmax<1>(dense_forward(x, p.w, p.b)));
  }

private:
  template <class X>
  void check(const X& x) const {
    if (x.extent(1) != inputs_)
      throw shape_error("locus: softmax_regression: a batch of shape " + x.shape().str() + " for " +
                        std::to_string(inputs_) + " inputs");
  }
  std::size_t inputs_, classes_;
};

}  // namespace locus::train

// The built-in model for float is compiled once, in the run-time file, in a separate-runtime
// program (config.hpp, LOCUS_DETAIL_PREBUILT).
#ifdef LOCUS_DETAIL_PREBUILT
#  include <locus/train/model.hpp>
namespace locus::train {
LOCUS_DETAIL_PREBUILT_MODEL(softmax_regression<float>)
}  // namespace locus::train
#endif
