#pragma once
// The learning rate over a run: a linear warmup, then constant or a cosine down to 0.
#include <locus/config.hpp>
#include <locus/train/options.hpp>

#include <cmath>
#include <cstddef>

namespace locus::train {

/// The learning rate at step `step` (0-based) of a run of `total` steps whose base rate is `lr`:
/// ramped over o.warmup_steps (rate * (step + 1) / warmup), then following o.schedule (unset
/// fields count as no warmup and constant: fit fills them with the policy's defaults first).
[[nodiscard]] inline float scheduled_lr(float lr, const fit_options& o, std::size_t step, std::size_t total) {
  const std::size_t warmup = o.warmup_steps.value_or(0);
  if (step < warmup) return lr * float(step + 1) / float(warmup);
  if (o.schedule.value_or(lr_schedule::constant) == lr_schedule::cosine && total > warmup) {
    // 1 at the first step after the warmup, 0 at step `total` (one past the last).
    const double t = double(step - warmup) / double(total - warmup);
    return float(double(lr) * 0.5 * (1.0 + std::cos(3.14159265358979323846 * t)));
  }
  return lr;
}

}  // namespace locus::train
