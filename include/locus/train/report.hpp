#pragma once
// Progress of a fit: the loss curve, TensorFlow-style lines ("step 100, loss = 0.4512 (epoch 1;
// 81234 examples/sec; 0.0032 sec/batch; 2 devices)", the epoch counted from 1) through fit_options::print, and a one-line bar on
// standard error. The only place in train/ that touches the terminal.
#include <locus/config.hpp>
#include <locus/train/options.hpp>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#if __has_include(<unistd.h>)
#  include <unistd.h>
#endif

namespace locus::train {
namespace detail {

/// "step 100, loss = 0.4512 (epoch 1; 81234 examples/sec; 0.0032 sec/batch; 2 devices)", with
/// "grad norm 1.2345; " after the epoch when the gradient is clipped.
LOCUS_RUNTIME_INLINE std::string progress_line(const progress& p, std::size_t devices, bool clipped = false);

/// Records the loss curve, prints the TF-style lines and draws the progress bar (when `prints`:
/// across processes, on rank 0 or with fit_options::print_on_every_rank).
class reporter {
public:
  using clock = std::chrono::steady_clock;
  LOCUS_RUNTIME_INLINE reporter(const fit_options& o, std::size_t total, std::size_t devices, bool prints = true);
  reporter(const reporter&) = delete;
  reporter& operator=(const reporter&) = delete;
  LOCUS_RUNTIME_INLINE ~reporter();

  /// A fit resumed from a checkpoint starts counting at its step: the bar starts part-way and
  /// the first rate counts only the steps run since.
  void resume_at(std::size_t step) noexcept { last_step_ = step; }

  LOCUS_RUNTIME_INLINE void operator()(fit_result& r, std::size_t step, std::size_t epoch, double loss,
                                       double grad_norm = 0);

private:
  LOCUS_RUNTIME_INLINE void draw(const progress& p);
  const fit_options& o_;
  std::size_t total_, devices_;
  clock::time_point start_, last_, last_bar_;
  std::size_t last_step_ = 0;
  bool prints_ = true, bar_ = false, drawn_ = false;
};

// The lines and the bar: part of the run-time (config.hpp, LOCUS_SEPARATE_RUNTIME).
#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE std::string progress_line(const progress& p, std::size_t devices, bool clipped) {
  char norm[64] = "";
  if (clipped) std::snprintf(norm, sizeof norm, "grad norm %.4g; ", p.grad_norm);
  char buf[320];
  std::snprintf(buf, sizeof buf, "step %zu, loss = %.4f (epoch %zu; %s%.0f examples/sec; %.4f sec/batch; %zu device%s)",
                p.step, p.loss, p.epoch + 1, norm, p.examples_per_sec, p.sec_per_batch, devices,
                devices == 1 ? "" : "s");
  return buf;
}

LOCUS_RUNTIME_INLINE reporter::reporter(const fit_options& o, std::size_t total, std::size_t devices, bool prints)
    : o_(o), total_(total), devices_(devices), start_(clock::now()), last_(start_), last_bar_(start_), prints_(prints) {
#if __has_include(<unistd.h>)
  bar_ = o.bar == progress_bar::on || (o.bar == progress_bar::automatic && ::isatty(2) != 0);
#else
  bar_ = o.bar == progress_bar::on;
#endif
  bar_ = bar_ && prints_;
}
LOCUS_RUNTIME_INLINE reporter::~reporter() {
  if (drawn_) std::fputs("\n", stderr);
}
LOCUS_RUNTIME_INLINE void reporter::operator()(fit_result& r, std::size_t step, std::size_t epoch, double loss,
                                               double grad_norm) {
  const auto now = clock::now();
  progress p;
  p.step = step;
  p.epoch = epoch;
  p.loss = loss;
  p.grad_norm = grad_norm;
  p.wall_seconds = std::chrono::duration<double>(now - start_).count();
  if (o_.log_every != 0 && step % o_.log_every == 0) {
    const double dt = std::chrono::duration<double>(now - last_).count();
    const std::size_t steps = step - last_step_;
    p.examples_per_sec = dt > 0 ? double(steps * o_.batch) / dt : 0;
    p.sec_per_batch = steps > 0 ? dt / double(steps) : 0;
    last_ = now;
    last_step_ = step;
    if (drawn_) std::fputs("\r\033[K", stderr);  // the line goes above the bar
    if (prints_ && o_.print) o_.print(progress_line(p, devices_, o_.clip_norm > 0));
  }
  if (bar_ && (step == total_ || now - last_bar_ > std::chrono::milliseconds(100))) {
    last_bar_ = now;
    draw(p);
  }
  r.curve.push_back(p);
  if (o_.on_step) o_.on_step(p);
}
LOCUS_RUNTIME_INLINE void reporter::draw(const progress& p) {
  constexpr int width = 30;
  const int done = total_ == 0 ? width : int(double(width) * double(p.step) / double(total_));
  std::string bar(std::size_t(done), '=');
  if (done < width) bar += '>';
  bar.resize(width, ' ');
  std::fprintf(stderr, "\r[%s] %zu/%zu epoch %zu loss %.4f %.1fs", bar.c_str(), p.step, total_, p.epoch + 1, p.loss,
               p.wall_seconds);
  std::fflush(stderr);
  drawn_ = true;
}
#endif

}  // namespace detail
}  // namespace locus::train
