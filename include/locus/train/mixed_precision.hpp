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
// pooling layers compute in float inside it (there are no 16-bit convolution kernels).
//
// float16 (`mixed<half>`) adds dynamic loss scaling (train/loss_scale.hpp, PyTorch's defaults): the
// loss is multiplied by the scale before the backward pass, the gradients divided by it as they are
// widened; a step whose gradient is not finite is skipped (counted in fit_result::skipped, whatever
// fit_options::on_non_finite says) and halves the scale, 2000 finite ones in a row double it.
// Checkpoints keep the scale.
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/tensor/half.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/train/layers.hpp>
#include <locus/train/loss_scale.hpp>
#include <locus/train/model.hpp>

#include <cstdint>
#include <memory>
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
  static_assert(detail::runs_in<H, M>,
                "locus: mixed_precision<H, M>: M must run its forward pass on 16-bit values (loss_and_grad_in<H>): "
                "wrap a train::sequential or a train::functional");

public:
  using value_type = float;
  using compute_type = H;
  template <device D>
  using params = typename M::template params<D>;

  explicit mixed_precision(M m) : m_(std::move(m)) {}
  /// A copy has a scaler of its own (each trainer's copy of the model scales for itself), starting
  /// from this one's scale. There are no moves: a move copies, so that the wrapper moved from
  /// still has its scaler (a model is small; its parameters live in the trainers).
  mixed_precision(const mixed_precision& o) : m_(o.m_), scaler_(copy_of(o.scaler_)) {}
  mixed_precision& operator=(const mixed_precision& o) {
    if (this != &o) {
      m_ = o.m_;
      scaler_ = copy_of(o.scaler_);
    }
    return *this;
  }
  ~mixed_precision() = default;

  [[nodiscard]] const M& model() const noexcept { return m_; }
  /// float16's dynamic loss scale (train/loss_scale.hpp): the trainer tells it each step's outcome.
  [[nodiscard]] const std::shared_ptr<detail::loss_scaler>& loss_scaler() const noexcept
    requires std::is_same_v<H, half>
  {
    return scaler_;
  }

  template <device D>
  [[nodiscard]] params<D> init() const {
    return m_.template init<D>();
  }
  /// The loss (float) and the float gradient of one batch, computed in H.
  template <device D, class Y>
  [[nodiscard]] auto loss_and_grad(const params<D>& p, const tensor<float, D, 2>& x, const Y& y) const
      -> decltype(std::declval<const detail::model_t<M, Y>&>().template loss_and_grad_in<H>(p, x, y)) {
    return m_.template loss_and_grad_in<H>(p, x, y, scaling());
  }
  template <device D, class Y>
  [[nodiscard]] auto loss_and_grad(const params<D>& p, const tensor<float, D, 2>& x, const Y& y,
                                   std::uint64_t stream) const
      -> decltype(std::declval<const detail::model_t<M, Y>&>().template loss_and_grad_in<H>(p, x, y, stream)) {
    return m_.template loss_and_grad_in<H>(p, x, y, stream, scaling());
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
  static std::shared_ptr<detail::loss_scaler> copy_of(const std::shared_ptr<detail::loss_scaler>& s) {
    return s ? std::make_shared<detail::loss_scaler>(*s) : nullptr;
  }
  [[nodiscard]] detail::loss_scaling scaling() const {
    if constexpr (std::is_same_v<H, half>) return {static_cast<float>(scaler_->scale())};
    else return {};
  }

  M m_;
  std::shared_ptr<detail::loss_scaler> scaler_ =
      std::is_same_v<H, half> ? std::make_shared<detail::loss_scaler>() : nullptr;
};

/// `train::mixed<bfloat16>(model)`: model trained in mixed precision (see mixed_precision).
template <class H, class M>
[[nodiscard]] mixed_precision<H, M> mixed(M m) {
  return mixed_precision<H, M>(std::move(m));
}

}  // namespace locus::train
