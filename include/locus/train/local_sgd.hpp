#pragma once
// local_sgd: periodic model averaging (local SGD; Stich, "Local SGD converges fast and communicates
// little", ICLR 2019). Each replica takes `period` optimiser steps on its own shard of each batch,
// with its own optimiser state, without communicating; then the parameters (and the optimiser
// states: sgd's momenta, Adam's moments) of all replicas are averaged over the communicator, one
// all-reduce each. With sgd, period = 1 is sync_average's trajectory (the step is linear in the
// gradient), up to rounding; a larger period trades agreement between the replicas for period
// times less communication. The step counts are not averaged: every replica counts its own steps
// (a replica that skipped a non-finite step has taken one fewer).
//
//   data_parallel<local_sgd, gpu<0>, gpu<1>> t{model, sgd{}, local_sgd{.period = 8}};
//
// Written against the public policy interface only (policy.hpp, replicas.hpp).
#include <locus/config.hpp>
#include <locus/data/resident.hpp>
#include <locus/data/sampler.hpp>
#include <locus/dist/agreement.hpp>
#include <locus/dist/nccl.hpp>
#include <locus/errors.hpp>
#include <locus/train/layout.hpp>
#include <locus/train/loss_scale.hpp>
#include <locus/train/optimizer.hpp>
#include <locus/train/options.hpp>
#include <locus/train/policy.hpp>

#include <array>
#include <cmath>
#include <limits>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>
#include <type_traits>

namespace locus::train {

namespace detail {
/// One step's shard for one replica of local_sgd.
struct local_shard {
  const data::labelled_images& data;
  const std::vector<std::uint32_t>& order;
  std::size_t first;     ///< the batch's first position in `order`
  std::size_t batch;     ///< the global batch
  std::size_t replicas;  ///< over all ranks
  std::size_t step;      ///< 0-based, for the message
  non_finite on_non_finite;
  /// float16's loss scale (train::mixed<half>): a replica's step whose gradient alone is not finite
  /// is skipped without throwing, and the policy tells the scale once a step.
  bool scaled = false;
};

/// Replica `index`'s gradient of its shard into `loss`; false when the loss or the gradient is not
/// finite (non_finite_error under throw_error). A function of the kind of device alone, shared by
/// every policy and communicator kind.
template <device D>
bool local_gradient(replica<D>& r, const local_shard& s, std::size_t index, double& loss, data::resident<D>* rows) {
  const auto mine = data::shard_of(s.first, s.batch, index, s.replicas);
  auto [x, y] = data::batch_of<D>(rows, s.data, s.order, mine.first, mine.count);
  const auto checked = checked_loss_and_grad(r, x, y);  // one host wait for both
  loss = checked.first;
  if (checked.second) return true;
  if (!(s.scaled && std::isfinite(loss)) && s.on_non_finite == non_finite::throw_error)
    throw non_finite_error("locus: fit: step " + std::to_string(s.step + 1) + " of the replica on " +
                           id_of<D>.full_name() + ": the loss or the gradient is not finite; not applied");
  return false;
}

/// The replica's parameters into its flat buffer, a failure flag after them (the loss slot 0).
template <device D>
void pack_parameters(const replica<D>& r, tensor<float, D, 1>& buffer, bool failed) {
  const std::size_t n = r.size();
  pack(r.parameters(), tensor_view<float, D, 1>(buffer.data(), shape{n}));
  set_slots(buffer, n, {0.f, failed ? 1.f : 0.f});
}

/// The replica's parameters := its flat buffer (the sum over all replicas) times `mean`.
template <device D>
void unpack_mean(tensor<float, D, 1>& buffer, replica<D>& r, float mean) {
  const tensor_view<float, D, 1> sum(buffer.data(), shape{r.size()});
  sum = sum * mean;
  unpack(sum, r.parameters());
}
}  // namespace detail

template <class Comm = dist::automatic>
struct basic_local_sgd {
  using communicator = Comm;
  static constexpr const char* name = "local_sgd";
  template <class Other>
  using over = basic_local_sgd<Other>;

  /// Local steps between two averages (H).
  std::size_t period = 4;
  /// Average every optimiser state buffer too, like the parameters (sgd's momentum, Adam's first
  /// and second moments); else each replica keeps its own.
  bool average_momentum = true;

  /// What every rank's local_sgd must agree on (data_parallel compares them across ranks).
  [[nodiscard]] std::vector<std::pair<std::string, std::uint64_t>> agreement() const {
    return {{"period", period}, {"average_momentum", average_momentum ? 1u : 0u}};
  }

  template <class Set>
  void check(const fit_options& o, const Set& s) const {
    if (period == 0) throw config_error("locus: local_sgd: period must be at least 1");
    if (o.batch % s.replica_count() != 0)
      throw config_error("locus: fit: local_sgd splits the batch evenly: " + std::to_string(o.batch) +
                         " is not a multiple of " + std::to_string(s.replica_count()) + " replicas");
    if (!o.checkpoint_path.empty())
      throw config_error("locus: fit: checkpoints during fit are for sync_average (local_sgd's replicas differ "
                         "between averages); call save() after fit");
    if (Set::communicator_type::spans_processes && o.on_non_finite == non_finite::stop)
      throw config_error("locus: fit: local_sgd across processes cannot stop on a non-finite step (the ranks would "
                         "disagree); use throw_error or skip_step");
  }

  template <class Set>
  void run(fit_context<Set>& c) const {
    auto& s = c.replicas;
    const auto& o = c.options;
    constexpr bool spans = Set::communicator_type::spans_processes;
    const std::size_t per_epoch = c.data.size() / o.batch, devices = s.device_count();
    std::vector<double> losses(devices);
    std::vector<char> skipped(devices);
    std::vector<std::string> failures(devices);
    std::size_t step = 0, since = 0;
    for (std::size_t epoch = 0; epoch < o.epochs && step < c.total_steps; ++epoch) {
      const auto order = data::shuffled(c.data.size(), o.seed, epoch);
      for (std::size_t b = 0; b < per_epoch && step < c.total_steps; ++b) {
        const float lr = c.lr(step);
        const detail::local_shard shard{c.data, order, b * o.batch, o.batch, s.replica_count(), step, o.on_non_finite,
                                          s.scaler() != nullptr};
        s.run([&](auto& r) {
          const std::size_t i = r.index();
          skipped[i] = false;
          try {
            skipped[i] = !detail::local_gradient(r.model(), shard, s.first_replica() + i, losses[i], r.rows());
            if (!skipped[i]) r.step(lr, r.model().gradients());
          } catch (...) {
            if constexpr (!spans) throw;
            // Reaches every rank at the average, whatever the exception's type.
            failures[i] = dist::failure_on(r.device(), std::current_exception());
          }
        });
        // The step's loss: the mean over the replicas whose loss is finite (a replica skipped for
        // its gradient alone still reports its loss; NaN when none is finite).
        double loss = 0;
        std::size_t finite_losses = 0;
        bool any_skipped = false;
        for (std::size_t i = 0; i < devices; ++i) {
          any_skipped = any_skipped || skipped[i];
          if (std::isfinite(losses[i])) {
            loss += losses[i];
            ++finite_losses;
          }
        }
        const bool losses_finite = finite_losses == devices;
        loss = finite_losses != 0 ? loss / double(finite_losses) : std::numeric_limits<double>::quiet_NaN();
        // float16's scale, once a step: halved when a replica's gradient overflowed (its step
        // skipped), else one finite step more. A non-finite loss, or no scale left, is on_non_finite's.
        bool scaled = false;
        if (auto* scaler = s.scaler()) {
          if (!any_skipped) scaler->finite_step();
          else scaled = losses_finite && scaler->back_off();
          if (any_skipped && !scaled && o.on_non_finite == non_finite::throw_error)
            throw non_finite_error("locus: fit: step " + std::to_string(step + 1) +
                                   ": a replica's gradient is not finite even at the smallest loss scale (2^-24); "
                                   "not applied");
        }
        ++step;
        const bool last = step == c.total_steps;
        if (any_skipped && o.on_non_finite == non_finite::stop && !scaled) {
          c.result.stopped = true;
          average(s, failures);
          return;
        }
        // A failure of this rank outside the replicas (on_step, print) rides in the next average.
        if (spans && !c.failure.empty() && failures[0].empty()) failures[0] = c.failure;
        if (++since == period || last) {
          average(s, failures);
          since = 0;
        }
        if (any_skipped) ++c.result.skipped;
        c.step_done(step, epoch, loss, !any_skipped);
      }
    }
  }

private:
  /// Every replica := the mean of all replicas' parameters (and optimiser states). Across ranks a failure
  /// flag travels with the parameters: every rank throws the first failing rank's message.
  template <class Set>
  void average(Set& s, std::vector<std::string>& failures) const {
    const std::size_t n = s.parameter_count();
    const float mean = 1.f / float(s.replica_count());
    std::string failure;
    for (const auto& f : failures)
      if (failure.empty()) failure = f;
    s.each([&](auto& r) { detail::pack_parameters(r.model(), r.buffer(), !failures[r.index()].empty()); });
    s.comm().all_reduce_sum(s.buffers(n + Set::extra));
    if (s.home([&](auto& h) { return detail::slot(h.buffer(), n + 1); }) > 0.f) throw error(s.comm().first_failure(failure));
    s.each([&](auto& r) { detail::unpack_mean(r.buffer(), r.model(), mean); });
    if (average_momentum && s.state_size() != 0) {
      s.comm().all_reduce_sum(s.states());
      s.each([&](auto& r) {
        auto& v = r.state();
        v = v * mean;
      });
    }
  }
};

/// Periodic model averaging in one process (NCCL where every replica is a GPU of its own).
using local_sgd = basic_local_sgd<>;

}  // namespace locus::train
