#pragma once
// Stochastic gradient descent (PyTorch's torch.optim.SGD without dampening or weight decay), with
// s the gradient's scale (1, sync_average's 1 / replicas, hogwild's staleness weight):
//   sgd{lr, 0}                  p -= lr * s * g                               no state
//   sgd{lr, momentum}           v = momentum * v + s * g;  p -= lr * v        one buffer (heavy ball)
//   sgd{lr, momentum, true}     v = momentum * v + s * g;  p -= lr * (s * g + momentum * v)   (Nesterov)
// Nesterov is a flag, not a type of its own, as in PyTorch: the state (v) means the same in both,
// so a checkpoint of one resumes under the other, and hogwild's policy tells them apart where it
// must (its look-ahead is heavy-ball's).
#include <locus/config.hpp>
#include <locus/backend/parallel.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/train/layout.hpp>
#include <locus/train/optim/kernel.hpp>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace locus::train {

namespace detail {
/// The momentum update of one element: v = momentum * v + scale * g (a product by 1 is exact).
LOCUS_HOST_DEVICE inline float next_velocity(float v, float g, float momentum, float scale) {
  return add_rn(mul_rn(v, momentum), mul_rn(g, scale));
}

enum class sgd_mode : unsigned char { plain, heavy_ball, nesterov };

/// One sgd step of one element: reads p, g (and v) once, writes p (and v). The plain step's rate
/// is lr * scale, one product on the host, as before momentum existed.
struct sgd_kernel {
  float* p;
  const float* g;
  float* v;
  float lr, momentum, scale;
  sgd_mode mode;
  LOCUS_HOST_DEVICE void operator()(std::size_t i) const {
    if (mode == sgd_mode::plain) {
      p[i] = add_rn(p[i], -mul_rn(g[i], lr));
      return;
    }
    const float vi = next_velocity(v[i], g[i], momentum, scale);
    v[i] = vi;
    const float direction = mode == sgd_mode::heavy_ball ? vi : add_rn(mul_rn(g[i], scale), mul_rn(vi, momentum));
    p[i] = add_rn(p[i], -mul_rn(direction, lr));
  }
};

/// The momentum half alone (hogwild applies the step to its shared copy).
struct velocity_step {
  float* v;
  const float* g;
  float momentum, scale;
  LOCUS_HOST_DEVICE void operator()(std::size_t i) const { v[i] = next_velocity(v[i], g[i], momentum, scale); }
};
}  // namespace detail

/// Stochastic gradient descent, with momentum unless momentum is 0 (heavy ball, or Nesterov's).
struct sgd {
  static constexpr const char* name = "sgd";
  float lr = 0.1f;
  float momentum = 0.9f;
  bool nesterov = false;

  /// Throws config_error for a learning rate that is not positive and finite, a momentum outside
  /// [0, 1), or Nesterov without momentum.
  void validate() const {
    if (!(std::isfinite(lr) && lr > 0.f))
      throw config_error("locus: sgd: the learning rate must be positive and finite, not " + detail::option_value(lr));
    if (!(momentum >= 0.f && momentum < 1.f))
      throw config_error("locus: sgd: momentum must be in [0, 1), not " + detail::option_value(momentum));
    if (nesterov && momentum == 0.f) throw config_error("locus: sgd: nesterov needs a momentum in (0, 1), not 0");
  }
  /// One momentum buffer, none without momentum.
  [[nodiscard]] std::size_t state_buffers() const noexcept { return momentum == 0.f ? 0 : 1; }
  /// True for the heavy-ball step that hogwild's momentum_update and look-ahead are written for.
  [[nodiscard]] bool heavy_ball() const noexcept { return momentum != 0.f && !nesterov; }

  [[nodiscard]] detail::sgd_kernel kernel(const step_args& a, const tensor_state& t) const noexcept {
    const auto mode = momentum == 0.f ? detail::sgd_mode::plain
                                      : (nesterov ? detail::sgd_mode::nesterov : detail::sgd_mode::heavy_ball);
    return {t.p, t.g, t.state[0], mode == detail::sgd_mode::plain ? a.lr * a.scale : a.lr, momentum, a.scale, mode};
  }
};

/// The momentum half of sgd's step alone: velocity = momentum * velocity + scale * grads (one
/// kernel per tensor; `velocity` flat, in the tensors' order).
template <device D>
void momentum_update(const sgd& opt, const std::vector<tensor_view<const float, D, 1>>& grads,
                     const tensor_view<float, D, 1>& velocity, float scale = 1.f) {
  const auto v = segments<float, D>(velocity.data(), grads);
  for (std::size_t t = 0; t < grads.size(); ++t)
    backend::for_each_index<D>(grads[t].size(),
                               detail::velocity_step{v[t].data(), grads[t].data(), opt.momentum, scale});
}

}  // namespace locus::train
