#pragma once
// Optimisers, applied to a replica's flat parameter vector as fused expressions on its device.
//   sgd{lr, 0}          p -= lr * g                                  (one kernel per tensor)
// Each product and sum is rounded on its own on every device, so replicas on a cpu and a GPU stay
// bit-identical.
//   sgd{lr, momentum}   v = momentum * v + g;  p -= lr * v           (one kernel per tensor, two outputs)
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/backend/parallel.hpp>
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
struct momentum_step {
  float* p;
  float* v;
  const float* g;
  float lr, momentum;
  LOCUS_HOST_DEVICE void operator()(std::size_t i) const {
    const float vi = add_rn(mul_rn(v[i], momentum), g[i]);
    v[i] = vi;
    p[i] = add_rn(p[i], -mul_rn(vi, lr));
  }
};
/// The plain step: p -= lr * g, rounded the same way.
struct sgd_step {
  float* p;
  const float* g;
  float lr;
  LOCUS_HOST_DEVICE void operator()(std::size_t i) const { p[i] = add_rn(p[i], -mul_rn(g[i], lr)); }
};

/// One step of opt on the tensors `params` with their gradients `grads` (views, one per tensor, on
/// device D) and the flat momentum buffer `velocity` (unused without momentum).
template <device D>
void apply(const sgd& opt, const std::vector<tensor_view<float, D, 1>>& params,
           const std::vector<tensor_view<const float, D, 1>>& grads, const tensor_view<float, D, 1>& velocity) {
  std::size_t offset = 0;
  for (std::size_t t = 0; t < params.size(); ++t) {
    const auto& p = params[t];
    const auto& g = grads[t];
    if (opt.momentum == 0.f) {
      backend::for_each_index<D>(p.size(), sgd_step{p.data(), g.data(), opt.lr});
    } else {
      backend::for_each_index<D>(p.size(), momentum_step{p.data(), velocity.data() + offset, g.data(), opt.lr,
                                                         opt.momentum});
    }
    offset += p.size();
  }
}

/// Views of the consecutive segments of a flat buffer, shaped like `like`.
template <class T, device D>
std::vector<tensor_view<T, D, 1>> segments(T* flat, const std::vector<tensor_view<float, D, 1>>& like) {
  std::vector<tensor_view<T, D, 1>> out;
  std::size_t offset = 0;
  for (const auto& v : like) {
    out.emplace_back(flat + offset, v.shape());
    offset += v.size();
  }
  return out;
}
}  // namespace detail

}  // namespace locus::train
