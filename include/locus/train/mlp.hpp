#pragma once
// The built-in model: a multilayer perceptron (dense + ReLU layers, softmax cross-entropy).
//
// It meets the model interface of model.hpp (train::model_on<mlp<float>, D>) like any user model.
// mlp writes its forward pass only (locus::ad differentiates it); handwritten_mlp is the same model
// with the backward pass written by hand, kept as the reference the tests and bench_train compare
// ad against (the same gradients within rounding, the same kernels but one).
#include <locus/ad/ad.hpp>
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
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace locus::train {

/// The parameters of an mlp on device D: w[l] [in, out] and b[l] [out], layer by layer.
template <class T, device D>
struct mlp_params {
  std::vector<tensor<T, D, 2>> w;
  std::vector<tensor<T, D, 1>> b;

  [[nodiscard]] std::size_t layers() const { return w.size(); }
  /// A copy on device D2 (logged transfers).
  template <device D2>
  [[nodiscard]] mlp_params<T, D2> to() const {
    mlp_params<T, D2> out;
    for (const auto& x : w) out.w.push_back(locus::to<D2>(x));
    for (const auto& x : b) out.b.push_back(locus::to<D2>(x));
    return out;
  }
  /// f(view) for every tensor: the weights then the bias of each layer.
  template <class F>
  void for_each(F&& f) {
    visit_all(*this, f);
  }
  template <class F>
  void for_each(F&& f) const {
    visit_all(*this, f);
  }
  /// One loop for both constnesses: mutable views from a mutable self, const views otherwise.
  template <class Self, class F>
  static void visit_all(Self& self, F& f) {
    for (std::size_t l = 0; l < self.w.size(); ++l) {
      f(self.w[l].view());
      f(self.b[l].view());
    }
  }

  /// A zero-filled copy of the shapes (momentum buffers, gradient sums).
  [[nodiscard]] mlp_params zeros_like() const {
    mlp_params out;
    for (const auto& x : w) out.w.emplace_back(x.shape(), T(0));
    for (const auto& x : b) out.b.emplace_back(x.shape(), T(0));
    return out;
  }
};

template <class T, device D>
struct mlp_step {
  tensor<T, D, 0> loss;
  mlp_params<T, D> grad;
};

/// sizes {784, 256, 10}: 784 inputs, one hidden ReLU layer of 256, 10 classes. Glorot-uniform
/// weights and zero biases from a counter-based generator: the same numbers on every device.
template <class T>
class mlp {
public:
  using value_type = T;
  template <device D>
  using params = mlp_params<T, D>;

  mlp(std::vector<std::size_t> sizes, std::uint64_t seed) : sizes_(std::move(sizes)), seed_(seed) {
    if (sizes_.size() < 2) throw shape_error("locus: mlp needs at least an input and an output size");
    for (auto s : sizes_)
      if (s == 0) throw shape_error("locus: mlp: a layer of size 0");
  }

  [[nodiscard]] const std::vector<std::size_t>& sizes() const { return sizes_; }
  /// The number of classes (the last size): labels lie in [0, classes()).
  [[nodiscard]] std::size_t classes() const { return sizes_.back(); }

  template <device D>
  [[nodiscard]] mlp_params<T, D> init() const {
    mlp_params<T, D> p;
    for (std::size_t l = 0; l + 1 < sizes_.size(); ++l) {
      p.w.push_back(on<D>(random::glorot_uniform<T>(shape{sizes_[l], sizes_[l + 1]}, seed_ * 1000 + l)));
      p.b.emplace_back(shape{sizes_[l + 1]}, T(0));
    }
    return p;
  }

  /// Mean softmax cross-entropy over the batch and its gradient with respect to every parameter
  /// (the forward pass, differentiated by locus::ad).
  template <device D>
  [[nodiscard]] mlp_step<T, D> loss_and_grad(const mlp_params<T, D>& p, const tensor<T, D, 2>& x,
                                             const tensor<std::int32_t, D>& y) const {
    check(p, x);
    std::vector<ad::var<T, D, 2>> w;
    std::vector<ad::var<T, D, 1>> b;
    for (std::size_t l = 0; l < p.layers(); ++l) {
      w.push_back(ad::parameter(p.w[l]));
      b.push_back(ad::parameter(p.b[l]));
    }
    ad::var<T, D, 2> h;  // the last hidden layer's output
    for (std::size_t l = 0; l + 1 < p.layers(); ++l)
      h = l == 0 ? ad::evaluate(relu(matmul(x, w[l]) + b[l])) : ad::evaluate(relu(matmul(h, w[l]) + b[l]));
    auto loss = p.layers() == 1 ? softmax_cross_entropy(matmul(x, w.back()) + b.back(), y)
                                : softmax_cross_entropy(matmul(h, w.back()) + b.back(), y);
    ad::backward(loss);
    mlp_step<T, D> out{std::move(loss.step()->owned), {}};
    for (std::size_t l = 0; l < p.layers(); ++l) {
      out.grad.w.push_back(w[l].take_grad());
      out.grad.b.push_back(b[l].take_grad());
    }
    return out;
  }

  /// The predicted class of each row of x.
  template <device D>
  [[nodiscard]] tensor<std::int64_t, D> predict(const mlp_params<T, D>& p, const tensor<T, D, 2>& x) const {
    check(p, x);
    tensor<T, D, 2> h = x.clone();
    for (std::size_t l = 0; l + 1 < p.layers(); ++l) {
      h = dense_relu_forward(h, p.w[l], p.b[l]);
    }
    return on<D>(argmax<1>(dense_forward(h, p.w.back(), p.b.back())));
  }

protected:
  template <device D>
  void check(const mlp_params<T, D>& p, const tensor<T, D, 2>& x) const {
    if (p.layers() + 1 != sizes_.size()) throw shape_error("locus: mlp: parameters of another model");
    if (x.extent(1) != sizes_.front())
      throw shape_error("locus: mlp: a batch of shape " + x.shape().str() + " for " + std::to_string(sizes_.front()) +
                        " inputs");
  }
  std::vector<std::size_t> sizes_;
  std::uint64_t seed_;
};


/// The same model with its backward pass written by hand: dense_backward per layer, the ReLU mask
/// from the kept activations. The reference for mlp's gradients and speed.
template <class T>
class handwritten_mlp : public mlp<T> {
public:
  using mlp<T>::mlp;

  template <device D>
  [[nodiscard]] mlp_step<T, D> loss_and_grad(const mlp_params<T, D>& p, const tensor<T, D, 2>& x,
                                             const tensor<std::int32_t, D>& y) const {
    this->check(p, x);
    std::vector<tensor<T, D, 2>> hidden;  // the hidden activations (reserved: h points into it)
    hidden.reserve(p.layers());
    std::vector<const tensor<T, D, 2>*> h{&x};  // the input of each layer
    for (std::size_t l = 0; l + 1 < p.layers(); ++l) {
      hidden.push_back(dense_relu_forward(*h.back(), p.w[l], p.b[l]));
      h.push_back(&hidden.back());
    }
    auto logits = dense_forward(*h.back(), p.w.back(), p.b.back());
    auto [loss, dy] = softmax_cross_entropy(logits, y);
    mlp_params<T, D> g;
    g.w.resize(p.layers());
    g.b.resize(p.layers());
    for (std::size_t l = p.layers(); l-- > 0;) {
      auto d = dense_backward(*h[l], p.w[l], dy, /*input_gradient=*/l > 0);
      g.w[l] = std::move(d.dw);
      g.b[l] = std::move(d.db);
      if (l > 0) dy = on<D>(relu_backward(d.dx, *h[l]));
    }
    return {std::move(loss), std::move(g)};
  }
};

}  // namespace locus::train

// The built-in model for float is compiled once, in the run-time file, in a separate-runtime
// program (config.hpp, LOCUS_DETAIL_PREBUILT).
#ifdef LOCUS_DETAIL_PREBUILT
#  include <locus/train/model.hpp>
namespace locus::train {
LOCUS_DETAIL_PREBUILT_MODEL(mlp<float>)
}  // namespace locus::train
#endif
