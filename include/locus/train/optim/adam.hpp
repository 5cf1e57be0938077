#pragma once
// Adam and AdamW (PyTorch's torch.optim.Adam and AdamW; Kingma and Ba 2015, Loshchilov and Hutter
// 2019). With g the scaled gradient (s * g), t this replica's step count (1 at the first step):
//   adam   g += weight_decay * p                        (L2: coupled, the decay rides in the moments)
//   adamw  p *= 1 - lr * weight_decay                   (decoupled: the moments never see it)
//          m = beta1 * m + (1 - beta1) * g
//          v = beta2 * v + (1 - beta2) * g * g
//          p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// as PyTorch arranges it (the bias corrections on the host, in double, once a step). Two state
// buffers (m, v); one kernel per tensor reads p, g, m, v once and writes p, m, v.
#include <locus/config.hpp>
#include <locus/errors.hpp>
#include <locus/train/optim/kernel.hpp>

#include <cmath>
#include <cstddef>
#include <string>

namespace locus::train {

namespace detail {
struct adam_kernel {
  float* p;
  const float* g;
  float* m;
  float* v;
  float scale, beta1, one_minus_beta1, beta2, one_minus_beta2;
  float step_size;   // lr / (1 - beta1^t)
  float sqrt_bias2;  // sqrt(1 - beta2^t)
  float eps;
  float coupled;     // adam's weight decay (0: none)
  float shrink;      // adamw's 1 - lr * weight_decay (1: none)
  LOCUS_HOST_DEVICE void operator()(std::size_t i) const {
    float pi = p[i];
    float gi = mul_rn(g[i], scale);
    if (coupled != 0.f) gi = add_rn(gi, mul_rn(pi, coupled));
    if (shrink != 1.f) pi = mul_rn(pi, shrink);
    const float mi = add_rn(mul_rn(m[i], beta1), mul_rn(gi, one_minus_beta1));
    const float vi = add_rn(mul_rn(v[i], beta2), mul_rn(mul_rn(gi, gi), one_minus_beta2));
    m[i] = mi;
    v[i] = vi;
    const float denominator = add_rn(div_rn(sqrt_rn(vi), sqrt_bias2), eps);
    p[i] = add_rn(pi, -mul_rn(div_rn(mi, denominator), step_size));
  }
};
}  // namespace detail

/// Adam (Decoupled false: L2 weight decay added to the gradient) or AdamW (Decoupled true: the
/// parameters decay apart from the moments). Use the names adam and adamw.
template <bool Decoupled>
struct basic_adam {
  static constexpr const char* name = Decoupled ? "adamw" : "adam";
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = Decoupled ? 0.01f : 0.f;

  /// Throws config_error naming the bad value: a learning rate that is not positive and finite,
  /// betas outside [0, 1), an eps that is not positive and finite (0 divides 0 by 0 where a
  /// gradient is 0), a negative or non-finite weight decay, and for adamw a decay factor
  /// 1 - lr * weight_decay that is not positive (it would flip the parameters' signs).
  void validate() const {
    const std::string who = std::string("locus: ") + name + ": ";
    if (!(std::isfinite(lr) && lr > 0.f))
      throw config_error(who + "the learning rate must be positive and finite, not " + detail::option_value(lr));
    if (!(beta1 >= 0.f && beta1 < 1.f)) throw config_error(who + "beta1 must be in [0, 1), not " + detail::option_value(beta1));
    if (!(beta2 >= 0.f && beta2 < 1.f)) throw config_error(who + "beta2 must be in [0, 1), not " + detail::option_value(beta2));
    if (!(std::isfinite(eps) && eps > 0.f))
      throw config_error(who + "eps must be positive and finite, not " + detail::option_value(eps));
    if (!(std::isfinite(weight_decay) && weight_decay >= 0.f))
      throw config_error(who + "weight_decay must be at least 0 and finite, not " + detail::option_value(weight_decay));
    if (Decoupled && !(double(lr) * double(weight_decay) < 1.0))
      throw config_error(who + "lr * weight_decay must be below 1 (the decay factor 1 - lr * weight_decay), not " +
                         detail::option_value(lr * weight_decay));
  }
  /// The first and second moments.
  [[nodiscard]] std::size_t state_buffers() const noexcept { return 2; }

  [[nodiscard]] detail::adam_kernel kernel(const step_args& a, const tensor_state& t) const noexcept {
    const double t_ = double(a.step);
    const double bias1 = 1.0 - std::pow(double(beta1), t_), bias2 = 1.0 - std::pow(double(beta2), t_);
    return {t.p,
            t.g,
            t.state[0],
            t.state[1],
            a.scale,
            beta1,
            1.f - beta1,
            beta2,
            1.f - beta2,
            float(double(a.lr) / bias1),
            float(std::sqrt(bias2)),
            eps,
            Decoupled ? 0.f : weight_decay,
            Decoupled ? 1.f - a.lr * weight_decay : 1.f};
  }
};

/// Adam with L2 weight decay (coupled: added to the gradient; default 0).
using adam = basic_adam<false>;
/// AdamW: weight decay decoupled from the moments (default 0.01).
using adamw = basic_adam<true>;

}  // namespace locus::train
