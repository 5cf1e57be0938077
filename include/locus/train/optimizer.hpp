#pragma once
// Optimisers, applied to a replica's flat parameter vector as fused expressions on its device.
//   sgd{lr, 0}          p -= lr * g                                  (one kernel per tensor)
//   sgd{lr, momentum}   v = momentum * v + g;  p -= lr * v           (two kernels per tensor)
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/locus.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace locus::train {

/// Stochastic gradient descent, with (heavy-ball) momentum unless momentum is 0.
struct sgd {
  float lr = 0.1f;
  float momentum = 0.9f;

  /// Throws config_error for a learning rate that is not positive and finite or a momentum outside [0, 1).
  void validate() const {
    if (!(std::isfinite(lr) && lr > 0.f))
      throw config_error("locus: sgd: the learning rate must be positive and finite, not " + std::to_string(lr));
    if (!(momentum >= 0.f && momentum < 1.f))
      throw config_error("locus: sgd: momentum must be in [0, 1), not " + std::to_string(momentum));
  }
};

namespace detail {
/// One step of opt on the tensors `params` (views in flat order) with the flat gradient `grad` and
/// momentum buffer `velocity` (unused without momentum), all on device D.
template <device D>
void apply(const sgd& opt, const std::vector<tensor_view<float, D, 1>>& params, const tensor_view<float, D, 1>& velocity,
           const tensor_view<const float, D, 1>& grad) {
  std::size_t offset = 0;
  for (const auto& p : params) {
    const tensor_view<const float, D, 1> g(grad.data() + offset, p.shape());
    if (opt.momentum == 0.f) {
      p = p - g * opt.lr;
    } else {
      const tensor_view<float, D, 1> v(velocity.data() + offset, p.shape());
      v = v * opt.momentum + g;
      p = p - v * opt.lr;
    }
    offset += p.size();
  }
}
}  // namespace detail

}  // namespace locus::train
