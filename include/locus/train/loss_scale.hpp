#pragma once
// float16's dynamic loss scale (train::mixed<half>), with PyTorch GradScaler's defaults: the loss
// is multiplied by the scale before the backward pass (so that small gradients do not underflow
// float16) and the gradients divided by it when they are widened to float; a step whose gradient
// is not finite is skipped and the scale halved, and after 2000 finite steps in a row it doubles.
// A step whose loss itself is not finite (the forward pass overflowed: no scale helps), or one
// that finds the scale at its floor, is fit_options::on_non_finite's (throw_error by default).
//
// One scaler per trainer (its copy of the model holds it); the policies tell it each step's
// outcome (sync_average and local_sgd once a step, hogwild once a worker's step), and checkpoints
// keep it (scale and finite-step count), so a resumed run scales as the uninterrupted one did.
#include <locus/config.hpp>

#include <cmath>
#include <cstdint>
#include <mutex>

namespace locus::train::detail {

class loss_scaler {
public:
  static constexpr double initial_scale = 65536.0;  ///< 2^16
  static constexpr double growth = 2.0;
  static constexpr double backoff = 0.5;
  static constexpr std::uint64_t growth_interval = 2000;
  /// The scale stays within [2^-24, 2^64]: float16's smallest subnormal, and a bound far past any
  /// use (float16's range is 2^-24 to 2^16) that keeps the scale and its inverse normal floats.
  static constexpr double smallest_scale = 0x1p-24;
  static constexpr double largest_scale = 0x1p64;

  loss_scaler() = default;
  loss_scaler(const loss_scaler& o) : scale_(o.scale()), clean_(o.clean()) {}
  loss_scaler& operator=(const loss_scaler&) = delete;

  [[nodiscard]] double scale() const {
    std::lock_guard lock(mutex_);
    return scale_;
  }
  /// Finite steps since the scale last changed.
  [[nodiscard]] std::uint64_t clean() const {
    std::lock_guard lock(mutex_);
    return clean_;
  }
  /// A step whose gradient was finite: the 2000th in a row doubles the scale.
  void finite_step() {
    std::lock_guard lock(mutex_);
    if (++clean_ == growth_interval) {
      scale_ = scale_ * growth > largest_scale ? largest_scale : scale_ * growth;
      clean_ = 0;
    }
  }
  /// A step whose gradient was not finite: the scale halves and true (the step is skipped under
  /// it), or false when it is at its floor already (no scale is left to take: the run diverged).
  bool back_off() {
    std::lock_guard lock(mutex_);
    clean_ = 0;
    if (scale_ <= smallest_scale) return false;
    scale_ *= backoff;
    return true;
  }
  /// From a checkpoint (validated by its parse).
  void restore(double scale, std::uint64_t clean) {
    std::lock_guard lock(mutex_);
    scale_ = scale;
    clean_ = clean;
  }

private:
  mutable std::mutex mutex_;
  double scale_ = initial_scale;
  std::uint64_t clean_ = 0;
};

/// Whether a step that is not finite is the scale's to handle (it is skipped and the scale halves,
/// whatever fit_options::on_non_finite says): a float16 model's, its loss finite (only the
/// backward pass overflowed at this scale) and some scale left. Otherwise (no scaler, a forward
/// pass that is itself not finite, or the scale at its floor) on_non_finite applies.
inline bool scale_takes(loss_scaler* s, double loss) {
  return s != nullptr && std::isfinite(loss) && s->back_off();
}

}  // namespace locus::train::detail
