#pragma once
// The policy concept: what drives one fit of data_parallel<Policy, Devices...>. The trainer knows
// no policy by name; a policy is a copyable class that carries its own options and provides
//
//   Policy::name                 a string, for logs ("sync_average")
//   typename Policy::communicator  a communicator kind (locus/dist/communicator.hpp)
//   p.run(c)                     the whole fit over a fit_context c (below): read batches, compute
//                                gradients on the replicas, exchange through c.replicas.comm(),
//                                apply optimiser steps, report every step through c.step_done
//
// and may provide
//   p.check(options, replicas)   throws config_error for options it cannot serve (called first,
//                                before anything changes)
//   p.recipe(options)            fills the fit options the user left unset (warmup, schedule) with
//                                the policy's own defaults
//   Policy::checkpoints          true when fit can write and resume checkpoints under it (its
//                                state between steps is the replicas' parameters and optimiser states)
//   Policy::clips_gradients      true when it applies fit_options::clip_norm (fit refuses the option
//                                for a policy without it)
//
// An option that a policy does not have is a compile error: hogwild{.lookahead = true} compiles,
// sync_average{.lookahead = true} does not. The built-in policies (sync_average.hpp, hogwild.hpp,
// local_sgd.hpp) are written against this interface only; README.md shows a user-written one.
#include <locus/config.hpp>
#include <locus/data/idx.hpp>
#include <locus/dist/agreement.hpp>
#include <locus/dist/communicator.hpp>
#include <locus/train/options.hpp>
#include <locus/train/replicas.hpp>
#include <locus/train/report.hpp>
#include <locus/train/schedule.hpp>

#include <cmath>
#include <concepts>
#include <cstddef>
#include <exception>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

namespace locus::train {

namespace detail {
/// Thrown by fit_context::step_done when on_epoch ends the fit; fit catches it (a policy lets it
/// pass, as any exception from step_done).
struct stop_fit {};
}  // namespace detail

/// What a policy's run() works with: the replicas, the data, the options (warmup and schedule
/// filled in), the run's length, and where each step is reported.
template <class Set>
struct fit_context {
  Set& replicas;
  const data::labelled_images& data;
  const fit_options& options;
  std::size_t total_steps = 0;    ///< the steps of the whole run (resumed ones included)
  std::size_t resumed_from = 0;   ///< steps a checkpoint had done: start after them
  fit_result& result;
  detail::reporter& report;
  /// Called after a step is applied (or skipped) with the steps done so far: writes a checkpoint
  /// when the options ask for one then.
  std::function<void(std::size_t steps_done)> after_step;
  /// Across ranks (a communicator that spans processes): what failed on this rank outside the
  /// replicas' work (its checkpoint write, its on_step or print callback), held here by step_done
  /// until the policy's next exchange carries it to every rank (a policy sets its failure flag
  /// when this is not empty; fit ends every rank with it at the latest after run()). In one
  /// process step_done throws instead, and this stays empty.
  std::string failure;

  /// The learning rate at step `step` (0-based) of the run.
  [[nodiscard]] float lr(std::size_t step) const {
    return scheduled_lr(replicas.optimizer().lr, options, step, total_steps);
  }
  /// Set by fit when it evaluates epochs (fit_options::validation, on_epoch): called at the end of
  /// each (and at the last step) with the epoch, the steps done and its mean loss; true stops the
  /// fit.
  std::function<bool(std::size_t epoch, std::size_t steps, double loss)> epoch_done{};

  /// Records step `step` (1-based: the steps done) of `epoch` with its loss (and the gradient's
  /// norm before clipping, when the policy clips): a checkpoint when one is due (applied steps
  /// only), then the curve, the progress line and bar, and on_step; at the end of an epoch its
  /// evaluation, which may end the fit (detail::stop_fit, caught by fit).
  void step_done(std::size_t step, std::size_t epoch, double loss, bool applied = true, double grad_norm = 0) {
    result.steps = step;
    if (applied && std::isfinite(loss)) {
      epoch_loss_ += loss;
      ++epoch_steps_;
    }
    const std::size_t per_epoch = options.batch == 0 ? 0 : data.size() / options.batch;
    const bool epoch_end = epoch_done && (step == total_steps || (per_epoch != 0 && step % per_epoch == 0));
    const auto end_epoch = [&] {
      const double mean = epoch_steps_ != 0 ? epoch_loss_ / double(epoch_steps_) : std::numeric_limits<double>::quiet_NaN();
      epoch_loss_ = 0;
      epoch_steps_ = 0;
      return epoch_done(epoch, step, mean);
    };
    if constexpr (!Set::communicator_type::spans_processes) {
      if (applied && after_step) after_step(step);
      report(result, step, epoch, loss, grad_norm);
      if (epoch_end && end_epoch()) throw detail::stop_fit{};
    } else {
      bool stop = false;
      if (failure.empty()) {  // else the run ends at the next exchange
        try {
          if (applied && after_step) after_step(step);
          report(result, step, epoch, loss, grad_norm);
          if (epoch_end) stop = end_epoch();
        } catch (...) {
          failure = dist::describe(std::current_exception());
        }
      }
      // Every rank ends the epoch here (the ranks agreed that they evaluate epochs): rank 0's
      // answer, whatever happened on this one.
      if (epoch_end) {
        float decision = stop ? 1.f : 0.f;
        replicas.comm().broadcast_host(&decision, 1);
        if (decision > 0.f) throw detail::stop_fit{};
      }
    }
  }

  // step_done's count of the epoch's losses (fit's bookkeeping, not for policies).
  double epoch_loss_ = 0;
  std::size_t epoch_steps_ = 0;
};

/// P is a training policy (see the list at the top).
template <class P>
concept policy = std::is_class_v<P> && std::copy_constructible<P> &&
                 requires { { P::name } -> std::convertible_to<std::string_view>; typename P::communicator; } &&
                 dist::communicator_kind<typename P::communicator>;

/// P is a policy that can train replicas on Ds...
template <class P, class... Ds>
concept policy_for =
    policy<P> && requires(const P& p, fit_context<replica_set_for<typename P::communicator, Ds...>>& c) { p.run(c); };

namespace detail {
/// A class with a name and a communicator kind: a policy but for copyability (data_parallel's
/// messages tell the two apart).
template <class P>
concept policy_shape = std::is_class_v<P> && requires {
  { P::name } -> std::convertible_to<std::string_view>;
  typename P::communicator;
} && dist::communicator_kind<typename P::communicator>;
/// run(c) is callable on a mutable policy (when it is not on a const one: run is not const).
template <class P, class... Ds>
concept runs_if_mutable = policy_shape<P> && requires(P& p, fit_context<replica_set_for<typename P::communicator, Ds...>>& c) {
  p.run(c);
};

template <class P, class Set>
void check_options(const P& p, const fit_options& o, const Set& s) {
  if constexpr (requires { p.check(o, s); }) p.check(o, s);
}
template <class P>
fit_options with_recipe(const P& p, fit_options o) {
  if constexpr (requires { p.recipe(o); }) p.recipe(o);
  return o;
}
template <class P>
inline constexpr bool clips_gradients = [] {
  if constexpr (requires { P::clips_gradients; }) return bool(P::clips_gradients);
  else return false;
}();
template <class P>
inline constexpr bool checkpoints_during_fit = [] {
  if constexpr (requires { P::checkpoints; }) return bool(P::checkpoints);
  else return false;
}();
}  // namespace detail

}  // namespace locus::train
