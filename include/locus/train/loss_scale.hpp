#pragma once
// float16's dynamic loss scale (train::mixed<half>), with PyTorch GradScaler's defaults: the loss
// is multiplied by the scale before the backward pass (so that small gradients do not underflow
// float16) and the gradients divided by it when they are widened to float; a step whose gradient
// is not finite is skipped and the scale halved, and after 2000 finite steps in a row it doubles.
//
// One scaler per trainer (its copy of the model holds it); the policies tell it each step's
// outcome (sync_average once a step, hogwild and local_sgd once a replica's step), and checkpoints
// keep it (scale and finite-step count), so a resumed run scales as the uninterrupted one did.
#include <locus/config.hpp>

#include <cstdint>
#include <mutex>

namespace locus::train::detail {

class loss_scaler {
public:
  static constexpr double initial_scale = 65536.0;  ///< 2^16
  static constexpr double growth = 2.0;
  static constexpr double backoff = 0.5;
  static constexpr std::uint64_t growth_interval = 2000;
  /// The scale does not fall below float16's smallest subnormal (2^-24): a loss whose gradient is
  /// not finite at any scale is a diverged run, which the steps skipped (fit_result::skipped) show.
  static constexpr double smallest_scale = 0x1p-24;

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
  /// One step's outcome: not finite halves the scale (the step is skipped by the policy), the
  /// 2000th finite one in a row doubles it.
  void update(bool finite) {
    std::lock_guard lock(mutex_);
    if (!finite) {
      scale_ = scale_ * backoff < smallest_scale ? smallest_scale : scale_ * backoff;
      clean_ = 0;
    } else if (++clean_ == growth_interval) {
      scale_ *= growth;
      clean_ = 0;
    }
  }
  /// From a checkpoint (validated by its parse: a positive finite scale).
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

}  // namespace locus::train::detail
