#pragma once
// sync_average: synchronous data parallelism. Every step, each replica computes the gradient of
// its shard of the batch (in `accumulate` micro-batches, summed locally) into its flat buffer,
// the buffers are summed by the communicator (with the loss and a failure flag in two extra
// slots), and every replica applies the same optimiser step to the mean (the sum scaled inside the
// step's kernel). With K replicas and global batch B the parameters follow those of one device
// with batch B.
//
//   data_parallel<sync_average, gpu<0>, gpu<1>>                 in process (NCCL where it can)
//   data_parallel<mpi<sync_average>, gpu<0>, gpu<1>>            across the ranks of an MPI job
//   data_parallel<basic_sync_average<dist::in_process>, ...>    a communicator of your choice
//   data_parallel<sync_average, cpu> t{model, sgd{}, sync_average{.accumulate = 4}};
//   data_parallel<sync_average, gpu<0>, gpu<1>> t{model, adamw{1e-3f}};   any optimiser (optimizer.hpp)
#include <locus/config.hpp>
#include <locus/data/resident.hpp>
#include <locus/data/sampler.hpp>
#include <locus/dist/agreement.hpp>
#include <locus/dist/nccl.hpp>
#include <locus/errors.hpp>
#include <locus/train/layout.hpp>
#include <locus/train/optimizer.hpp>
#include <locus/train/options.hpp>
#include <locus/train/policy.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace locus::train {

namespace detail {
/// One step's shard for one replica of sync_average.
struct sync_shard {
  const data::labelled_images& data;
  const std::vector<std::uint32_t>& order;
  std::size_t first;       ///< the batch's first position in `order`
  std::size_t batch;       ///< the global batch
  std::size_t replicas;    ///< over all ranks
  std::size_t micro;       ///< examples per micro-batch
  std::size_t accumulate;  ///< micro-batches per replica
  std::size_t n;           ///< parameters
  bool packed;             ///< the gradient goes into the flat buffer (else it stays in the model's tensors)
};

/// Replica `index`'s share of a sync_average step: the gradient of its shard of the batch, summed
/// over the micro-batches on the replica (packed: into its flat buffer `g`, else kept in the
/// model's tensors), the loss summed over them into slot n of `g` and (packed) 0 into slot n + 1
/// (no failure), all written on the device: the host waits for none of it (the loss is read once, with
/// the finite check, by step_summary). The micro-batches' losses are summed in double and rounded
/// once, as a sum on the host would be. A function of the kind of device alone: every policy and
/// communicator kind shares one copy.
template <device D>
void sync_gradient(replica<D>& r, tensor<float, D, 1>& g, const sync_shard& s, std::size_t index,
                   data::resident<D>* rows) {
  const auto mine = data::shard_of(s.first, s.batch, index, s.replicas);
  const tensor_view<float, D, 0> loss_slot(g.data() + s.n, locus::shape<0>{});
  tensor<double, D, 0> total;
  if (s.accumulate > 1) total = tensor<double, D, 0>(locus::shape<0>{}, 0.0);
  for (std::size_t k = 0; k < s.accumulate; ++k) {
    auto [x, y] = data::batch_of<D>(rows, s.data, s.order, mine.first + k * s.micro, s.micro);
    r.loss_and_grad_into(x, y, loss_slot);
    if (s.accumulate > 1) total = total + cast<double>(loss_slot);
    if (!s.packed) continue;
    if (k == 0) {
      r.pack_gradients(tensor_view<float, D, 1>(g.data(), shape{s.n}));
    } else {
      const auto sums = segments<float, D>(g.data(), r.parameters());
      for (std::size_t t = 0; t < sums.size(); ++t) sums[t] = sums[t] + r.gradients()[t];
    }
  }
  if (s.accumulate > 1) loss_slot = cast<float>(total);
  if (s.packed) tensor_view<float, D, 1>(g.data() + s.n + 1, shape{1}).fill(0.f);  // the flag is exchanged
}

}  // namespace detail

template <class Comm = dist::automatic>
struct basic_sync_average {
  using communicator = Comm;
  static constexpr const char* name = "sync_average";
  static constexpr bool checkpoints = true;
  /// fit_options::clip_norm: the mean gradient's global norm, over every replica and rank, after the
  /// exchange (every buffer then holds the same sum); the scale rides in the step's kernel.
  static constexpr bool clips_gradients = true;
  /// The same policy over another communicator kind (mpi<P> and nccl<P> use it).
  template <class Other>
  using over = basic_sync_average<Other>;

  /// Micro-batches per update: each replica's shard of a batch is taken in this many parts whose
  /// gradients are summed on the replica, then exchanged once (less memory per pass; the update
  /// equals one of the whole batch).
  std::size_t accumulate = 1;

  /// What every rank's sync_average must agree on (data_parallel compares them across ranks).
  [[nodiscard]] std::vector<std::pair<std::string, std::uint64_t>> agreement() const { return {{"accumulate", accumulate}}; }

  template <class Set>
  void check(const fit_options& o, const Set& s) const {
    if (accumulate == 0) throw config_error("locus: sync_average: accumulate must be at least 1");
    // accumulate > batch / replicas first: replicas * accumulate would wrap for a huge accumulate.
    if (accumulate > o.batch / s.replica_count() || o.batch % (s.replica_count() * accumulate) != 0) {
      const int ranks = s.comm().size();
      const std::size_t devices = s.device_count();
      throw config_error("locus: fit: sync_average splits the batch evenly: " + std::to_string(o.batch) +
                         " is not a multiple of " + std::to_string(s.replica_count()) + " replicas (" +
                         std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s") + " x " + std::to_string(devices) +
                         " device" + (devices == 1 ? "" : "s") + ")" +
                         (accumulate > 1 ? " x " + std::to_string(accumulate) + " micro-batches" : std::string()));
    }
  }

  template <class Set>
  void run(fit_context<Set>& c) const {
    auto& s = c.replicas;
    const auto& o = c.options;
    const std::size_t n = s.parameter_count(), replicas = s.replica_count(), devices = s.device_count();
    constexpr bool spans = Set::communicator_type::spans_processes;
    // One device in one process without accumulation uses the model's own gradient tensors;
    // otherwise they are packed into the flat buffers that are summed.
    const bool packed = devices > 1 || spans || accumulate > 1;
    const std::size_t micro = o.batch / replicas / accumulate;
    const float mean = packed ? 1.f / float(replicas * accumulate) : 1.f;
    std::vector<std::string> failures(devices);
    const std::size_t per_epoch = c.data.size() / o.batch;
    // Resumed: start in the epoch of the first step not done (no order is drawn for the others).
    std::size_t step = c.resumed_from / per_epoch * per_epoch;
    for (std::size_t epoch = c.resumed_from / per_epoch; epoch < o.epochs && step < c.total_steps; ++epoch) {
      const auto order = data::shuffled(c.data.size(), o.seed, epoch);
      for (std::size_t b = 0; b < per_epoch && step < c.total_steps; ++b) {
        if (step < c.resumed_from) {  // done before the checkpoint
          ++step;
          continue;
        }
        const std::size_t first = b * o.batch;
        // Across ranks, a failure of this rank since the last exchange (its checkpoint, on_step)
        // rides in this one instead of a gradient.
        const bool failed = spans && !c.failure.empty();
        const detail::sync_shard shard{c.data, order, first, o.batch, replicas, micro, accumulate, n, packed};
        s.run([&](auto& r) {
          const std::size_t i = r.index();
          auto& g = r.buffer();
          try {
            if (failed) {
              if (i == 0) failures[i] = c.failure;
              detail::set_slots(g, n, {0.f, 1.f});
              return;
            }
            detail::sync_gradient(r.model(), g, shard, s.first_replica() + i, r.rows());
          } catch (...) {
            if constexpr (!spans) throw;
            // Across ranks the failure travels in the buffer: every rank learns of it (whatever
            // the exception's type).
            failures[i] = dist::failure_on(r.device(), std::current_exception());
            detail::set_slots(g, n, {0.f, 1.f});
          }
        });
        std::string failure;
        if (packed) {
          for (const auto& f : failures)
            if (failure.empty()) failure = f;
          s.comm().all_reduce_sum(s.buffers(n + Set::extra));
          // The sum's scale to the mean rides in the update's kernel (one pass fewer per replica).
        }
        // The loss, the failure flag and the finite check of the gradient this step applies come
        // to the host in one read (one host wait a step, besides the exchange's own).
        const auto summary = s.home([&](auto& h) {
          using H = typename std::remove_cvref_t<decltype(h)>::device_type;
          if (packed) return detail::step_summary<H>(h.buffer(), n, std::array{tensor_view<const float, H, 1>(h.buffer().data(), shape{n})});
          return detail::step_summary<H>(h.buffer(), n, h.model().gradients());
        });
        if (spans && summary.failed) throw error(s.comm().first_failure(failure));
        const double loss = double(summary.loss) * double(mean);
        // The gradient this step applies, on the home device: the exchanged sum, or (one device,
        // not packed) the model's own tensors. Checked for finiteness, and its norm (before the
        // clipping) for clipping: the norm of the mean gradient (the sum's, scaled; in double:
        // finite elements can have a norm past FLT_MAX).
        const auto [finite, norm] = s.home([&](auto& h) {
          using H = typename std::remove_cvref_t<decltype(h)>::device_type;
          std::vector<tensor_view<const float, H, 1>> exchanged;
          if (packed) exchanged.emplace_back(h.buffer().data(), shape{n});
          const auto& gradient = packed ? exchanged : h.model().gradients();
          const bool ok = std::isfinite(loss) && summary.finite;
          const double size = ok && o.clip_norm > 0 ? std::sqrt(detail::squared_norm<H>(gradient)) * double(mean) : 0.0;
          return std::pair{ok, size};
        });
        if (!finite) {
          if (detail::scale_takes(s.scaler(), loss)) {
            // float16's loss scale halved: the step is skipped, whatever on_non_finite says
          } else {
            if (o.on_non_finite == non_finite::throw_error)
              throw non_finite_error("locus: fit: step " + std::to_string(step + 1) + ": the loss (" +
                                     std::to_string(loss) + ") or the gradient is not finite; the step is not applied");
            if (o.on_non_finite == non_finite::stop) {
              c.result.stopped = true;
              return;
            }
          }
          ++c.result.skipped;
          ++step;
          c.step_done(step, epoch, loss, false);
          continue;
        }
        // The factor rank 0's on every rank (one broadcast: ranks whose reductions differ in the
        // last bit still apply the same step).
        float clip = 1.f;
        if (o.clip_norm > 0) {
          clip = norm > double(o.clip_norm) ? float(double(o.clip_norm) / norm) : 1.f;
          if constexpr (spans) s.comm().broadcast_host(&clip, 1);
        }
        const float lr = c.lr(step);
        s.run([&](auto& r) {
          using D = typename std::remove_cvref_t<decltype(r)>::device_type;
          if (!packed)
            r.step(lr, r.model().gradients(), clip);
          else
            r.step(lr, segments<const float, D>(r.buffer().data(), r.model().parameters()), mean * clip);
        });
        if (auto* scaler = s.scaler()) scaler->finite_step();
        ++step;
        c.step_done(step, epoch, loss, true, norm);
      }
    }
  }
};

/// The default synchronous policy: in process, over NCCL where every replica is a GPU of its own.
using sync_average = basic_sync_average<>;

}  // namespace locus::train
