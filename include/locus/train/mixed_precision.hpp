#pragma once
// Mixed-precision training: a model whose forward and backward passes run in bfloat16 while its
// parameters (the "master weights"), the optimiser and its state stay float32.
//
//   train::sequential mlp{nn::dense(784, 256), nn::relu, nn::dense(256, 10)};
//   train::data_parallel<train::sync_average, gpu<0>, gpu<1>> t{train::mixed<bfloat16>(mlp), train::adamw{}};
//
// Each step rounds the float parameters to bfloat16 copies (one kernel per tensor) and the batch
// likewise, runs the forward and backward passes on them (the products on a GPU's tensor cores,
// elementwise kernels computing in float and rounding once at their store, sums accumulating in
// float), widens the model's output to float for the loss (softmax and its cross-entropy in
// float), and widens the bfloat16 gradients back to float (one kernel per tensor). Everything the
// policies see is float: the gradient they average or apply, the parameters they update, copy
// between devices and save. So every policy, communicator and checkpoint works unchanged, and a
// checkpoint of a mixed-precision run holds the float masters (it resumes exactly, in either
// precision). Evaluation (mean_loss, validation, predict) runs the float model.
//
// Precision is a type, not an option of fit: only a model wrapped in mixed_precision instantiates
// the 16-bit code, so a float program compiles none of it. The wrapped model is a train::sequential
// or train::functional (they run their forward on 16-bit values: `loss_and_grad_in<H>`); conv2d and
// pooling layers compute in float inside it (there are no 16-bit convolution kernels). float16
// (locus::half) needs dynamic loss scaling, which locus does not have yet: it is refused at
// compile time.
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/tensor/half.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/train/layers.hpp>
#include <locus/train/model.hpp>

#include <cstdint>
#include <type_traits>
#include <utility>

namespace locus::train {

namespace detail {
template <class M>
struct target_type_of {};
template <class M>
  requires requires { typename M::target_type; }
struct target_type_of<M> {
  using target_type = typename M::target_type;
};

/// M, named through the member template's own parameters (lookup in M waits for the call).
template <class M, class...>
using model_t = M;

template <class H, class M>
inline constexpr bool runs_in = requires(const M& m, const typename M::template params<cpu>& p,
                                         const tensor<float, cpu, 2>& x) {
  m.template loss_and_grad_in<H>(p, x, std::declval<const targets_of<M, cpu>&>(), std::uint64_t{});
};
}  // namespace detail

/// M trained with its forward and backward passes in H (bfloat16); see the top of this file.
template <class H, class M>
class mixed_precision : public detail::target_type_of<M> {
  static_assert(is_half_float_v<H>, "locus: mixed_precision<H, M>: H is the 16-bit type the passes run in (bfloat16)");
  static_assert(!std::is_same_v<H, half>,
                "locus: mixed_precision<half, M>: float16 training needs dynamic loss scaling (its gradients "
                "underflow float16's range), which locus does not have yet: train in bfloat16 (float's range, no "
                "scaling needed)");
  static_assert(detail::runs_in<H, M>,
                "locus: mixed_precision<H, M>: M must run its forward pass on 16-bit values (loss_and_grad_in<H>): "
                "wrap a train::sequential or a train::functional");

public:
  using value_type = float;
  using compute_type = H;
  template <device D>
  using params = typename M::template params<D>;

  explicit mixed_precision(M m) : m_(std::move(m)) {}

  [[nodiscard]] const M& model() const noexcept { return m_; }

  template <device D>
  [[nodiscard]] params<D> init() const {
    return m_.template init<D>();
  }
  /// The loss (float) and the float gradient of one batch, computed in H.
  template <device D, class Y>
  [[nodiscard]] auto loss_and_grad(const params<D>& p, const tensor<float, D, 2>& x, const Y& y) const
      -> decltype(std::declval<const detail::model_t<M, Y>&>().template loss_and_grad_in<H>(p, x, y)) {
    return m_.template loss_and_grad_in<H>(p, x, y);
  }
  template <device D, class Y>
  [[nodiscard]] auto loss_and_grad(const params<D>& p, const tensor<float, D, 2>& x, const Y& y,
                                   std::uint64_t stream) const
      -> decltype(std::declval<const detail::model_t<M, Y>&>().template loss_and_grad_in<H>(p, x, y, stream)) {
    return m_.template loss_and_grad_in<H>(p, x, y, stream);
  }
  /// Evaluation runs the float model: the mean loss in evaluation mode, the predicted classes.
  template <device D, class Y>
  [[nodiscard]] auto loss(const params<D>& p, const tensor<float, D, 2>& x, const Y& y) const
      -> decltype(std::declval<const detail::model_t<M, Y>&>().loss(p, x, y)) {
    return m_.loss(p, x, y);
  }
  template <device D>
  [[nodiscard]] auto predict(const params<D>& p, const tensor<float, D, 2>& x) const
      -> decltype(std::declval<const detail::model_t<M, D>&>().predict(p, x)) {
    return m_.predict(p, x);
  }
  [[nodiscard]] std::size_t classes() const noexcept
    requires requires(const M& m) { m.classes(); }
  {
    return m_.classes();
  }

private:
  M m_;
};

/// `train::mixed<bfloat16>(model)`: model trained in mixed precision (see mixed_precision).
template <class H, class M>
[[nodiscard]] mixed_precision<H, M> mixed(M m) {
  return mixed_precision<H, M>(std::move(m));
}

}  // namespace locus::train
