#pragma once
// hogwild: asynchronous lock-free updates of shared parameters (Hogwild!, Niu, Recht, Re and
// Wright, 2011). The parameters live in a home copy in host memory; one worker per device, on its
// own host thread, reads them (stale values allowed), computes the gradient of its own batches,
// updates its own momentum on its device (sgd's momentum_update) and adds the step to the home
// copy with relaxed std::atomic_ref operations: no lock, no barrier between workers, no data race.
// Across the ranks of an MPI job (mpi<hogwild>) the home copy is rank 0's MPI window. Any other
// optimiser (Nesterov, adam, adamw) runs its own step on the worker's replica, with the worker's
// own state and step count, and the change it made to the parameters read is what the worker adds
// to the home copy (scaled by the staleness weight: a scaled gradient would cancel out of Adam's
// m / sqrt(v)).
//
//   data_parallel<hogwild, gpu<0>, gpu<1>> t{model, sgd{}, hogwild{.lookahead = false}};
#include <locus/config.hpp>
#include <locus/backend/omp.hpp>
#include <locus/backend/parallel.hpp>
#include <locus/data/resident.hpp>
#include <locus/data/sampler.hpp>
#include <locus/dist/agreement.hpp>
#include <locus/dist/in_process.hpp>
#include <locus/errors.hpp>
#include <locus/train/layout.hpp>
#include <locus/train/loss_scale.hpp>
#include <locus/train/optimizer.hpp>
#include <locus/train/options.hpp>
#include <locus/train/policy.hpp>
#include <locus/train/runner.hpp>
#include <locus/train/schedule.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace locus::train {

/// How hogwild's workers write the shared parameters. Both are relaxed std::atomic_ref
/// operations, so neither is a data race in the C++ memory model.
enum class hogwild_writes {
  atomic_add,  ///< one atomic read-modify-write per element (a compare-exchange loop for float): no update is lost
  load_store,  ///< an atomic load, then an atomic store of the sum: no locked instruction, but an update
               ///< that interleaves with another worker's on the same element can be lost (as in
               ///< Hogwild!'s unsynchronised writes)
};

namespace detail {
/// x += v on memory other threads touch: a relaxed atomic read-modify-write, or (rmw false) a
/// relaxed atomic load and store, which can lose a concurrent update but locks nothing.
inline void add_to(float& x, float v, bool rmw) noexcept {
  std::atomic_ref<float> a(x);
  if (rmw) a.fetch_add(v, std::memory_order_relaxed);
  else a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

/// The shuffled order of each epoch, drawn on first use and shared by the workers; only the
/// `keep` most recent epochs stay (hogwild's workers are at most a step each apart, and an evicted
/// order a worker still reads stays alive through its shared_ptr).
class epoch_orders {
public:
  epoch_orders(std::size_t examples, std::uint64_t seed, std::size_t keep)
      : examples_(examples), seed_(seed), keep_(keep) {}
  [[nodiscard]] std::shared_ptr<const std::vector<std::uint32_t>> of(std::size_t epoch) {
    std::lock_guard lock(mutex_);
    for (const auto& [e, order] : kept_)
      if (e == epoch) return order;
    auto order = std::make_shared<const std::vector<std::uint32_t>>(data::shuffled(examples_, seed_, epoch));
    if (kept_.size() == keep_) {
      auto oldest = kept_.begin();
      for (auto it = kept_.begin(); it != kept_.end(); ++it)
        if (it->first < oldest->first) oldest = it;
      kept_.erase(oldest);
    }
    kept_.emplace_back(epoch, order);
    return order;
  }

private:
  std::size_t examples_;
  std::uint64_t seed_;
  std::size_t keep_;
  std::mutex mutex_;
  std::vector<std::pair<std::size_t, std::shared_ptr<const std::vector<std::uint32_t>>>> kept_;
};

/// What hogwild's workers share in one run (everything but their devices).
struct hogwild_run {
  const data::labelled_images& data;
  const fit_options& options;
  fit_result& result;
  reporter& report;
  const optimizer_info& optimizer;
  std::size_t total_steps;
  std::vector<float>& home;
  std::vector<float>& momenta;
  std::mutex& result_mutex;
  std::atomic<std::size_t>& next;
  std::atomic<std::size_t>& applied;
  epoch_orders& orders;
  std::size_t per_epoch, ranks, rank, my_steps;
  int threads_per_worker;
  std::size_t size;
  bool heavy, generic, ahead, rmw, scale_by_staleness;
  float momentum;
  /// Across ranks: rank 0's window (empty in process: the home copy is `home`).
  std::function<void(float*)> read;
  std::function<void(const float*)> add;
  /// float16's loss scale (train::mixed<half>), or null: told each worker step's outcome.
  loss_scaler* scaler = nullptr;
};

/// One hogwild worker on a device of kind D (inside its device_scope) until the run's steps are
/// taken (see basic_hogwild::run). A function of the kind of device alone: every device list and
/// communicator kind shares one copy.
/// `own_step` is the worker's optimiser step (the generic path).
template <device D>
void hogwild_worker(const hogwild_run& h, replica<D>& local, tensor<float, D, 1>& grad, tensor<float, D, 1>& velocity,
                    const std::function<void(float)>& own_step, data::resident<D>* rows) {
  const auto& o = h.options;
  const std::size_t size = h.size;
  const int threads_per_worker = h.threads_per_worker;
  const bool ahead = h.ahead, rmw = h.rmw;
  const float mom = h.momentum;
  auto& home = h.home;
  auto& momenta = h.momenta;
  // The cores are shared out among the workers whose kernels run on them.
  const backend::scoped_host_threads budget(backend::runs_on_host<D> ? threads_per_worker : backend::host_threads());
  std::vector<float> staging(size), step_host, delta;
  std::vector<float> mine(ahead ? size : 0, 0.f);  // this worker's share of `momenta`
  // A worker that fails stops the others at their next step; run_parallel rethrows its error.
  struct stop_all {
    std::atomic<std::size_t>& next;
    std::size_t total;
    ~stop_all() {
      if (std::uncaught_exceptions() > 0) next.store(total, std::memory_order_relaxed);
    }
  } guard{h.next, h.my_steps};
  for (;;) {
    const std::size_t k = h.next.fetch_add(1, std::memory_order_relaxed);
    if (k >= h.my_steps) break;
    const std::size_t step = h.rank + k * h.ranks;
    const std::size_t epoch = step / h.per_epoch, first = (step % h.per_epoch) * o.batch;
    const float lr = scheduled_lr(h.optimizer.lr, o, step, h.total_steps);
    // Read the current (possibly stale, possibly mid-update) parameters.
    const std::size_t seen = h.applied.load(std::memory_order_relaxed);
    if (h.read) {
      h.read(staging.data());
    } else {
      const backend::scoped_host_threads mine_only(threads_per_worker);
      backend::parallel_ranges(size, [&](std::size_t b, std::size_t e) {
        for (std::size_t u = b; u < e; ++u) {
          float t = std::atomic_ref<float>(home[u]).load(std::memory_order_relaxed);
          if (ahead) t -= lr * mom * std::atomic_ref<float>(momenta[u]).load(std::memory_order_relaxed);
          staging[u] = t;
        }
      });
    }
    from_host(staging, local.parameters());
    auto [x, y] = data::batch_of<D>(rows, h.data, *h.orders.of(epoch), first, o.batch);
    const auto checked = checked_loss_and_grad(local, x, y);  // one host wait for both
    const double loss = checked.first;
    if (!checked.second) {
      const bool scaled = scale_takes(h.scaler, loss);  // float16's scale halved: skipped, whatever on_non_finite says
      if (!scaled && o.on_non_finite == non_finite::throw_error)
        throw non_finite_error("locus: fit: a step of the worker on " + device_id(id_of<D>).full_name() +
                               ": the loss or the gradient is not finite; the step is not applied");
      std::lock_guard lock(h.result_mutex);
      if (!scaled && o.on_non_finite == non_finite::stop) {
        h.result.stopped = true;
        h.next.store(h.my_steps, std::memory_order_relaxed);
        break;
      }
      ++h.result.skipped;
      h.report(h.result, h.result.curve.size() + 1, epoch, loss);
      continue;
    }
    if (h.scaler != nullptr) h.scaler->finite_step();
    // The worker's own momentum, on its device; then lock-free updates of the home copy.
    const float weight =
        h.scale_by_staleness ? 1.f / float(1 + h.applied.load(std::memory_order_relaxed) - seen) : 1.f;
    // The home copy takes -(d * rate) per element.
    const float* d = nullptr;
    float rate = lr;
    if (h.generic) {
      own_step(lr);
      step_host = to_host(local.parameters());
      for (std::size_t e = 0; e < size; ++e) step_host[e] = (step_host[e] - staging[e]) * weight;
      d = step_host.data();
      rate = -1.f;  // d is the change itself (a product by -1 is exact)
    } else {
      if (h.heavy) momentum_update(*h.optimizer.sgd_options, local.gradients(), velocity.view(), weight);
      else local.pack_gradients(tensor_view<float, D, 1>(grad.data(), shape{size}));
      rate = h.heavy ? lr : lr * weight;
      const auto& direction = h.heavy ? velocity : grad;
      d = direction.data();
      if constexpr (!std::is_same_v<D, cpu>) {
        step_host = tensor_view<const float, D, 1>(direction.data(), shape{size}).to_vector();
        d = step_host.data();
      }
    }
    const auto n = static_cast<std::ptrdiff_t>(size);
    if (h.add) {
      delta.resize(size);
      for (std::ptrdiff_t e = 0; e < n; ++e) delta[std::size_t(e)] = -(d[e] * rate);
      h.add(delta.data());
    } else {
      const backend::scoped_host_threads mine_only(threads_per_worker);
      backend::parallel_ranges(size, [&](std::size_t b, std::size_t e) {
        for (std::size_t u = b; u < e; ++u) {
          add_to(home[u], -(d[u] * rate), rmw);
          if (ahead) {  // the momenta's sum follows this worker's new momentum
            add_to(momenta[u], d[u] - mine[u], rmw);
            mine[u] = d[u];
          }
        }
      });
    }
    h.applied.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(h.result_mutex);
    h.report(h.result, h.result.curve.size() + 1, epoch, loss);
  }
}

}  // namespace detail

template <class Comm = dist::in_process>
struct basic_hogwild {
  using communicator = Comm;
  static constexpr const char* name = "hogwild";
  template <class Other>
  using over = basic_hogwild<Other>;

  /// Each worker computes its gradient at a look-ahead of the parameters, theta - lr * momentum * V,
  /// V the sum of all workers' momenta, kept beside the home copy with the same lock-free updates
  /// (DANA-Zero: Hakimi, Barkai, Gabel and Schuster, "Taming momentum in a distributed asynchronous
  /// environment", 2019): where the others' momenta will have taken the parameters by the time this
  /// gradient lands. One worker: Nesterov's point. Unset: on with heavy-ball sgd momentum in process,
  /// off otherwise; true needs sgd with (heavy-ball) momentum and in-process hogwild (config_error).
  std::optional<bool> lookahead = std::nullopt;
  /// Each worker's gradient enters its momentum scaled by 1 / (1 + tau), tau being the updates the
  /// other workers applied between its read of the parameters and its own update (staleness-aware
  /// asynchronous SGD, Zhang, Gupta, Lian and Liu, IJCAI 2016). One worker: tau = 0. Under
  /// mpi<hogwild> tau counts this rank's workers only. With an optimiser that keeps state of its
  /// own (adam, adamw: each worker steps its own and adds the change) the change is scaled instead.
  /// Unset: on for sgd (the rule is SGD's), off for the others: an Adam step's size is the rate
  /// whatever the gradient's scale, so the weight only shrank every step (the README's CNN, AdamW,
  /// 2 workers, 2 epochs: 0.8646 scaled, 0.8784 not, sync_average 0.8861).
  std::optional<bool> scale_by_staleness = std::nullopt;
  /// Whether a worker's step is weighed by 1 / (1 + tau) with optimiser `opt`: scale_by_staleness,
  /// or unset, whether `opt` is sgd (with or without momentum, Nesterov's too).
  [[nodiscard]] bool weighs_staleness(const optimizer_info& opt) const {
    return scale_by_staleness.value_or(opt.sgd_options.has_value());
  }
  /// How the updates reach the home copy. Unset: load_store in process (faster an epoch than
  /// atomic_add at the same accuracy: bench/RESULTS-train.md),
  /// atomic_add across ranks (MPI_Accumulate is atomic per element; load_store is refused there).
  std::optional<hogwild_writes> writes = std::nullopt;

  /// Fills what the run leaves unset: a cosine schedule after a 20-step warmup (stale momentum
  /// needs both to reach sync_average's accuracy on 4 workers; see the README's table).
  void recipe(fit_options& o) const {
    if (!o.schedule) o.schedule = lr_schedule::cosine;
    if (!o.warmup_steps) o.warmup_steps = 20;
  }

  template <class Set>
  void check(const fit_options& o, const Set& s) const {
    constexpr bool spans = Set::communicator_type::spans_processes;
    if (!o.checkpoint_path.empty())
      throw config_error("locus: fit: checkpoints during fit are for sync_average (hogwild's workers change the "
                         "parameters under any snapshot); call save() after fit");
    if (spans && writes == hogwild_writes::load_store)
      throw config_error("locus: fit: hogwild_writes::load_store is for in-process hogwild (mpi<hogwild> adds with "
                         "MPI_Accumulate)");
    const auto& opt = s.optimizer();
    if (lookahead.value_or(false) && (spans || !opt.sgd_options || !opt.sgd_options->heavy_ball()))
      throw config_error(std::string("locus: fit: lookahead needs momentum and in-process hogwild (") +
                         (spans                  ? "mpi<hogwild> has no shared momentum sum"
                          : !opt.sgd_options     ? "the optimiser is " + opt.name + ", not sgd"
                          : opt.sgd_options->nesterov ? std::string("sgd's nesterov is a look-ahead of its own")
                                                      : std::string("the momentum is 0")) +
                         ")");
  }

  template <class Set>
  void run(fit_context<Set>& c) const;
};

/// The default asynchronous policy, in one process.
using hogwild = basic_hogwild<>;

template <class Comm>
template <class Set>
void basic_hogwild<Comm>::run(fit_context<Set>& c) const {
  constexpr bool spans = Set::communicator_type::spans_processes;
  auto& s = c.replicas;
  const auto& o = c.options;
  const std::size_t size = s.parameter_count();
  // Heavy-ball sgd keeps its momentum_update path (and its figures); plain sgd adds lr * g; any
  // other optimiser steps the worker's replica and adds the change (`generic`).
  const auto& opt = s.optimizer();
  const bool heavy = opt.sgd_options && opt.sgd_options->heavy_ball();
  const bool generic = !heavy && opt.state_buffers != 0;
  const float mom = heavy ? opt.sgd_options->momentum : 0.f;
  const bool ahead = lookahead.value_or(!spans && mom != 0.f);
  const bool rmw = writes.value_or(spans ? hogwild_writes::atomic_add : hogwild_writes::load_store) ==
                   hogwild_writes::atomic_add;
  // The home copy: in host memory, touched by the workers only through std::atomic_ref; across
  // ranks, rank 0's copy in an MPI window. Each worker keeps its own momentum on its device (a
  // momentum shared in the home copy trained worse: bench/RESULTS-train.md, "why").
  std::vector<float> home = s.parameters();
  std::vector<float> momenta(ahead ? size : 0, 0.f);  // the workers' momenta summed (lookahead)
  std::mutex result_mutex;  // the curve and the progress lines only; never the parameters
  std::atomic<std::size_t> next{0};     // this rank's steps: rank, rank + ranks, ...
  std::atomic<std::size_t> applied{0};  // this rank's updates of the home copy (the staleness, the steps)
  const std::size_t per_epoch = c.data.size() / o.batch;
  const auto ranks = std::size_t(s.comm().size()), rank = std::size_t(s.comm().rank());
  // Steps rank, rank + ranks, ... below the total (no overflow when the total is SIZE_MAX).
  const std::size_t my_steps = c.total_steps / ranks + (rank < c.total_steps % ranks ? 1 : 0);
  // Each epoch's order is drawn when a worker first needs it; a few recent ones are kept.
  detail::epoch_orders orders(c.data.size(), o.seed, s.device_count() + 1);
  // The caller's thread budget (backend::host_threads(): the process's, or a scoped_host_threads), shared out among the workers
  // whose kernels run on the host; every worker restores its thread's setting when it ends.
  const int threads_per_worker = std::max(1, backend::host_threads() / int(s.device_count()));
  std::unique_ptr<dist::any_window> window;  // closed after the workers join
  if constexpr (spans) {
    static_assert(Set::communicator_type::has_window,
                  "locus: hogwild across processes needs a communicator with one-sided access (dist::mpi)");
    s.comm().require_threads("data_parallel<mpi<hogwild>>");
    window = s.comm().open_window(home.data(), size);
  }

  detail::hogwild_run shared{c.data,
                              o,
                              c.result,
                              c.report,
                              s.optimizer(),
                              c.total_steps,
                              home,
                              momenta,
                              result_mutex,
                              next,
                              applied,
                              orders,
                              per_epoch,
                              ranks,
                              rank,
                              my_steps,
                              threads_per_worker,
                              size,
                              heavy,
                              generic,
                              ahead,
                              rmw,
                              weighs_staleness(opt),
                              mom,
                              {},
                              {},
                              s.scaler()};
  if constexpr (spans) {
    shared.read = [&](float* dst) { window->read(dst); };
    shared.add = [&](const float* delta) { window->add(delta); };
  }
  std::vector<std::function<void()>> work;
  for (std::size_t i = 0; i < s.device_count(); ++i) {
    work.push_back([&, i] {
      s.at(i, [&](auto& r) {
        using D = typename std::remove_cvref_t<decltype(r)>::device_type;
        try {
          const std::function<void(float)> own_step = [&](float lr) { r.step(lr, r.model().gradients()); };
          detail::hogwild_worker<D>(shared, r.model(), r.buffer(), r.state(), own_step, r.rows());
        } catch (...) {
          // Across ranks nobody waits for this worker at a collective: end the job, with the
          // message (whatever the exception's type).
          if constexpr (spans) s.comm().abort(dist::failure_on(r.device(), std::current_exception()));
          throw;
        }
      });
    });
  }
  detail::run_parallel(work);
  // The steps taken (applied or skipped), not those planned: a run that stopped early records
  // where it stopped.
  std::size_t steps = applied.load(std::memory_order_relaxed) + c.result.skipped;
  if constexpr (spans) {
    window.reset();  // collective: every rank's updates are in rank 0's copy
    s.comm().broadcast_host(home.data(), size);
    float total = float(steps);  // exact: counts stay far below 2^24
    s.comm().sum_host(&total, 1);
    steps = std::size_t(total);
  }
  c.result.steps = steps;
  // Every worker has joined: the home copy is plain memory again. Every replica takes it.
  s.set_parameters(home);
}

}  // namespace locus::train
