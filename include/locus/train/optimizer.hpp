#pragma once
// The optimiser: SGD with (heavy-ball) momentum, its state (one momentum buffer per replica) and
// the one step every policy applies, as fused kernels on the replica's device:
//   sgd{lr, 0}          p -= lr * g                                  (one kernel per tensor)
//   sgd{lr, momentum}   v = momentum * v + s * g;  p -= lr * v       (one kernel per tensor, two outputs)
// where s scales the gradient (1, or hogwild's staleness weight). A policy that applies the step
// elsewhere (hogwild's shared home copy) takes the momentum half alone: momentum_update.
// Each product and sum is rounded on its own on every device, so replicas on a cpu and a GPU stay
// bit-identical.
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/backend/parallel.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/train/layout.hpp>

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
// Products and sums rounded one at a time, on every device: nvcc would fuse v * m + g into one FMA
// (one rounding) where the host rounds twice, and replicas of one sync_average trainer on a cpu and
// a GPU would drift apart by an ulp a step (seen on an H200: a resumed mixed cpu + GPU run no longer
// equalled the uninterrupted one). The host build must not contract either (no -ffp-contract=fast
// with FMA instructions enabled).
LOCUS_HOST_DEVICE inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
LOCUS_HOST_DEVICE inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

/// The momentum step of one element: reads p, v, g once, writes p and v.
/// The momentum update of one element: v = momentum * v + scale * g (a product by 1 is exact).
LOCUS_HOST_DEVICE inline float next_velocity(float v, float g, float momentum, float scale) {
  return add_rn(mul_rn(v, momentum), mul_rn(g, scale));
}
struct momentum_step {
  float* p;
  float* v;
  const float* g;
  float lr, momentum, scale;
  LOCUS_HOST_DEVICE void operator()(std::size_t i) const {
    const float vi = next_velocity(v[i], g[i], momentum, scale);
    v[i] = vi;
    p[i] = add_rn(p[i], -mul_rn(vi, lr));
  }
};
/// The momentum half alone (the step is applied elsewhere).
struct velocity_step {
  float* v;
  const float* g;
  float momentum, scale;
  LOCUS_HOST_DEVICE void operator()(std::size_t i) const { v[i] = next_velocity(v[i], g[i], momentum, scale); }
};
/// The plain step: p -= lr * g, rounded the same way.
struct sgd_step {
  float* p;
  const float* g;
  float lr;
  LOCUS_HOST_DEVICE void operator()(std::size_t i) const { p[i] = add_rn(p[i], -mul_rn(g[i], lr)); }
};

}  // namespace detail

/// One step of `opt` at learning rate `lr` on the tensors `params` with their gradients `grads`
/// (views, one per tensor, on device D; the gradients scaled by `scale`) and the flat momentum
/// buffer `velocity` (unused without momentum).
template <device D>
void apply_step(const sgd& opt, float lr, const std::vector<tensor_view<float, D, 1>>& params,
                const std::vector<tensor_view<const float, D, 1>>& grads, const tensor_view<float, D, 1>& velocity,
                float scale = 1.f) {
  const auto v = segments<float, D>(velocity.data(), params);
  for (std::size_t t = 0; t < params.size(); ++t) {
    const auto& p = params[t];
    const auto& g = grads[t];
    if (opt.momentum == 0.f)
      backend::for_each_index<D>(p.size(), detail::sgd_step{p.data(), g.data(), lr * scale});
    else
      backend::for_each_index<D>(p.size(),
                                 detail::momentum_step{p.data(), v[t].data(), g.data(), lr, opt.momentum, scale});
  }
}

/// The momentum half of the step alone: velocity = momentum * velocity + scale * grads.
template <device D>
void momentum_update(const sgd& opt, const std::vector<tensor_view<const float, D, 1>>& grads,
                     const tensor_view<float, D, 1>& velocity, float scale = 1.f) {
  const auto v = segments<float, D>(velocity.data(), grads);
  for (std::size_t t = 0; t < grads.size(); ++t)
    backend::for_each_index<D>(grads[t].size(), detail::velocity_step{v[t].data(), grads[t].data(), opt.momentum, scale});
}

}  // namespace locus::train
