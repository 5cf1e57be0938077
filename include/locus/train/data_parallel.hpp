#pragma once
// data_parallel<Policy, Devices...>: one model trained on several devices, TensorFlow's classic
// multi-GPU modes and more, each a policy (policy.hpp):
//
//   data_parallel<sync_average, gpu<0>, gpu<1>>           gradients averaged every step, one update
//   data_parallel<hogwild, gpu<0>, gpu<1>, gpu<2>>        lock-free asynchronous updates (Hogwild!)
//   data_parallel<local_sgd, gpu<0>, gpu<1>>              local steps, parameters averaged every H
//   data_parallel<mpi<sync_average>, gpu<0>>              the same across the ranks of an MPI job
//
// The trainer is thin: it checks the device list and the policy at compile time, owns the replicas
// (replicas.hpp), validates the data and options, and hands one fit to the policy. Any model
// meeting train::model_on<M, D> (model.hpp) for every device of the list is trained; each
// replica's tensors are typed on their device.
#include <locus/config.hpp>
#include <locus/data/dataset.hpp>
#include <locus/data/idx.hpp>
#include <locus/data/sampler.hpp>
#include <locus/dist/agreement.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/train/checkpoint.hpp>
#include <locus/train/hogwild.hpp>
#include <locus/train/layout.hpp>
#include <locus/train/local_sgd.hpp>
#include <locus/train/model.hpp>
#include <locus/train/mpi.hpp>
#include <locus/train/optimizer.hpp>
#include <locus/train/options.hpp>
#include <locus/train/policy.hpp>
#include <locus/train/replicas.hpp>
#include <locus/train/report.hpp>
#include <locus/train/sync_average.hpp>

#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace locus::train {

namespace detail {
template <class... Ds>
struct all_distinct : std::true_type {};
template <class D, class... Ds>
struct all_distinct<D, Ds...> : std::bool_constant<(!std::is_same_v<D, Ds> && ...) && all_distinct<Ds...>::value> {};

/// A policy's communicator kind (in_process for a type that is not a policy: its static_assert
/// speaks, not a cascade of errors).
template <class P>
struct communicator_of {
  using type = dist::in_process;
};
template <policy P>
struct communicator_of<P> {
  using type = typename P::communicator;
};

/// The data set holds what the model trains on, one per row: for a classifier (values false)
/// labels, each a class of the model (in [0, classes) when the model says how many, classes(), else
/// at least 0); for a model trained on float targets (values true) a row of them per example.
/// Checked before anything is trained. (Here, not in data_parallel: one copy for every policy and
/// device list.)
LOCUS_RUNTIME_INLINE void check_labelled(const char* what, const data::labelled_images& data, std::int64_t classes,
                                         bool values = false);
/// fit's checks of its data: a batch of 1 to data.size() examples, and check_labelled's.
LOCUS_RUNTIME_INLINE void check_fit_data(const data::labelled_images& data, std::size_t batch, std::int64_t classes,
                                         bool values);
/// fit_options::validation and on_epoch: for a policy whose replicas agree after every step; the
/// validation set as fit's data (what the model trains on, not empty).
LOCUS_RUNTIME_INLINE void check_epochs(const fit_options& o, const data::labelled_images& data, const char* policy,
                                       bool policy_agrees, std::int64_t classes, bool values, bool evaluates);
/// "epoch 1 (step 234): loss = 0.5213; validation loss = 0.4821, accuracy = 0.8312" (the validation
/// part when there is a validation set, its accuracy for a classifier: nan where they are NaN).
LOCUS_RUNTIME_INLINE std::string epoch_line(const epoch_summary& e, bool validated, bool classifier);
/// fit_options::clip_norm: finite and not negative, and 0 unless the policy clips.
LOCUS_RUNTIME_INLINE void check_clip_norm(float clip_norm, const char* policy, bool policy_clips);
/// fit's checks when it will write checkpoints to `path`: the policy writes them, the reader would
/// accept them (the optimiser's name, the tensors' ranks), and rank 0 can create a file there.
LOCUS_RUNTIME_INLINE void check_checkpointing(const std::string& path, const char* policy, bool policy_writes,
                                              const optimizer_info& opt,
                                              const std::vector<std::vector<std::uint64_t>>& shapes, int rank);
/// Checks a checkpoint against a trainer (its model's shapes and size, its optimiser, its replica
/// count and state size) before anything changes; true when an sgd state of format 1 is dropped.
LOCUS_RUNTIME_INLINE bool check_restore(const checkpoint& c, const std::string& name,
                                        const std::vector<std::vector<std::uint64_t>>& mine,
                                        std::size_t parameter_count, const optimizer_info& opt,
                                        std::size_t device_count, std::size_t state_size);

// The checks: part of the run-time (config.hpp, LOCUS_SEPARATE_RUNTIME).
#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE void check_fit_data(const data::labelled_images& data, std::size_t batch, std::int64_t classes,
                                         bool values) {
  if (batch == 0 || batch > data.size())
    throw config_error("locus: fit: batch " + std::to_string(batch) + " for a data set of " +
                       std::to_string(data.size()) + " examples");
  check_labelled("fit", data, classes, values);
}

LOCUS_RUNTIME_INLINE void check_epochs(const fit_options& o, const data::labelled_images& data, const char* policy,
                                       bool policy_agrees, std::int64_t classes, bool values, bool evaluates) {
  if (!o.validation && !o.on_epoch) return;
  if (!policy_agrees)
    throw config_error(std::string("locus: fit: ") + policy + "'s replicas do not hold the same parameters at the end "
                       "of an epoch: fit_options::validation and on_epoch are for policies that declare checkpoints "
                       "(sync_average); call mean_loss or accuracy after fit");
  if (o.validation) {
    const auto& v = *o.validation;
    check_evaluates("fit: validation", evaluates);
    if (v.size() == 0) throw config_error("locus: fit: the validation set is empty");
    check_labelled("fit: validation", v, classes, values);
    // The same model reads both: rows of the same width, targets of the same width.
    if (v.images.extent(1) != data.images.extent(1))
      throw shape_error("locus: fit: validation rows of " + std::to_string(v.images.extent(1)) +
                        " features, the data's of " + std::to_string(data.images.extent(1)));
    if (values && v.targets.extent(1) != data.targets.extent(1))
      throw shape_error("locus: fit: validation rows of " + std::to_string(v.targets.extent(1)) +
                        " targets, the data's of " + std::to_string(data.targets.extent(1)));
  }
}

LOCUS_RUNTIME_INLINE std::string epoch_line(const epoch_summary& e, bool validated, bool classifier) {
  char buf[256];
  int n = std::snprintf(buf, sizeof buf, "epoch %zu (step %zu): loss = %.4f", e.epoch + 1, e.step, e.loss);
  if (validated && n > 0 && std::size_t(n) < sizeof buf)
    n += std::snprintf(buf + n, sizeof buf - std::size_t(n), "; validation loss = %.4f", e.validation_loss);
  if (validated && classifier && n > 0 && std::size_t(n) < sizeof buf)
    std::snprintf(buf + n, sizeof buf - std::size_t(n), ", accuracy = %.4f", e.validation_accuracy);
  return buf;
}

LOCUS_RUNTIME_INLINE void check_clip_norm(float clip_norm, const char* policy, bool policy_clips) {
  char value[32];
  std::snprintf(value, sizeof value, "%g", double(clip_norm));  // 1e-07, not std::to_string's 0.000000
  if (!(clip_norm >= 0) || !std::isfinite(clip_norm))
    throw config_error(std::string("locus: fit: clip_norm ") + value +
                       ": the gradient's largest norm must be finite and positive (0: no clipping)");
  if (clip_norm > 0 && !policy_clips)
    throw config_error(std::string("locus: fit: ") + policy + " does not clip gradients (fit_options::clip_norm " +
                       value + "); sync_average does, or leave clip_norm at 0");
}

LOCUS_RUNTIME_INLINE void check_checkpointing(const std::string& path, const char* policy, bool policy_writes,
                                              const optimizer_info& opt,
                                              const std::vector<std::vector<std::uint64_t>>& shapes, int rank) {
  if (!policy_writes)
    throw config_error(std::string("locus: fit: ") + policy + " does not write checkpoints during fit; call save() "
                       "after fit");
  // What the checkpoint reader would refuse is refused now, not after the run (an optimiser named
  // "SignSGD", a tensor of rank 9).
  checkpoint::check_layout(path, opt.name, shapes, opt.state_buffers);
  // Rank 0 writes them: a folder that is missing or read-only fails now, not after the run.
  if (rank == 0) checkpoint::check_writable(path);
}

LOCUS_RUNTIME_INLINE void check_labelled(const char* what, const data::labelled_images& data, std::int64_t classes,
                                         bool values) {
  const std::string where = std::string("locus: ") + what + ": ";
  if (values) {
    if (!data.has_targets())
      throw data::data_error(where + "the model trains on float targets (regression) and the data set has none" +
                             (data.labels.size() != 0 ? " (it has labels)" : "") +
                             ": make it with make_dataset(features, row_size, targets, target_size)");
    if (data.targets.extent(0) != data.images.extent(0))
      throw shape_error(where + std::to_string(data.images.extent(0)) + " rows of features and " +
                        std::to_string(data.targets.extent(0)) + " rows of targets");
    data::detail::check_finite(where, std::span<const float>(data.targets.data(), data.targets.size()),
                               data.targets.extent(1), "target");
    return;
  }
  if (data.labels.size() == 0 && data.has_targets())
    throw data::data_error(where + "the model is a classifier (int32 labels) and the data set has float targets: "
                           "train a model of float targets (train::functional with losses::mean_squared_error, "
                           "binary_cross_entropy or losses::regression(f), or a model declaring `using target_type = "
                           "float;`)");
  if (data.images.extent(0) != data.labels.size())
    throw shape_error(std::string("locus: ") + what + ": " + std::to_string(data.images.extent(0)) + " images and " +
                      std::to_string(data.labels.size()) + " labels");
  const std::int32_t* y = data.labels.data();
  for (std::size_t i = 0; i < data.labels.size(); ++i)
    if (y[i] < 0 || y[i] >= classes)
      throw data::data_error(std::string("locus: ") + what + ": label " + std::to_string(i) + " is " +
                             std::to_string(y[i]) +
                             (classes == std::numeric_limits<std::int64_t>::max()
                                  ? std::string(": a label is a class, 0 or more")
                                  : ", outside the model's classes [0, " + std::to_string(classes) + ")"));
}

LOCUS_RUNTIME_INLINE bool check_restore(const checkpoint& c, const std::string& name,
                                        const std::vector<std::vector<std::uint64_t>>& mine,
                                        std::size_t parameter_count, const optimizer_info& opt,
                                        std::size_t device_count, std::size_t state_size) {
  if (c.shapes != mine)
    throw checkpoint_error("locus: checkpoint " + name + ": its tensors " + describe_shapes(c.shapes) +
                           " do not match the model's " + describe_shapes(mine));
  if (c.parameters.size() != parameter_count)
    throw checkpoint_error("locus: checkpoint " + name + ": " + std::to_string(c.parameters.size()) +
                           " parameters for a model of " + std::to_string(parameter_count));
  const auto buffers = [](std::uint64_t b) {
    return std::to_string(b) + " state buffer" + (b == 1 ? "" : "s") + " per parameter";
  };
  // Format 1 was sgd's alone, its momentum saved whether or not it was 0: any sgd takes it (the
  // state means the same with Nesterov), sgd without momentum drops it.
  const bool legacy_sgd = c.format == 1 && opt.name == "sgd";
  if (c.optimizer != opt.name || (c.state_buffers != opt.state_buffers && !legacy_sgd))
    throw checkpoint_error("locus: checkpoint " + name + ": written by " + c.optimizer + " (" +
                           buffers(c.state_buffers) + "), this trainer's optimiser is " + opt.name + " (" +
                           buffers(opt.state_buffers) + ")");
  // One state and one step count per replica (or none: they start at zero); set_states indexes
  // both by replica.
  if (!c.optimizer_state.empty() && c.optimizer_state.size() != device_count)
    throw checkpoint_error("locus: checkpoint " + name + ": optimiser state for " +
                           std::to_string(c.optimizer_state.size()) + " replicas, this trainer has " +
                           std::to_string(device_count));
  if (!c.streams.empty() && c.streams.size() != device_count)
    throw checkpoint_error("locus: checkpoint " + name + ": random-stream positions for " +
                           std::to_string(c.streams.size()) + " replicas, this trainer has " +
                           std::to_string(device_count));
  if (!c.optimizer_steps.empty() && c.optimizer_steps.size() != device_count)
    throw checkpoint_error("locus: checkpoint " + name + ": optimiser step counts for " +
                           std::to_string(c.optimizer_steps.size()) + " replicas, this trainer has " +
                           std::to_string(device_count));
  const bool drop = legacy_sgd && opt.state_buffers == 0;
  for (const auto& s : c.optimizer_state)
    if (!drop && s.size() != state_size)
      throw checkpoint_error("locus: checkpoint " + name + ": an optimiser state of " + std::to_string(s.size()) +
                             " floats, this trainer's is " + std::to_string(state_size));
  return drop;
}
#endif

/// Marks a trainer busy for one fit (or restore) and refuses a second one meanwhile: from another
/// thread, or from fit's own callbacks (on_step, print).
class fit_scope {
public:
  fit_scope(std::atomic<bool>& busy, const char* what) : busy_(busy) {
    if (busy_.exchange(true, std::memory_order_acq_rel))
      throw config_error(std::string("locus: ") + what + ": this trainer is already in fit() (on another thread, or "
                         "called again from on_step or print); one fit at a time per trainer");
  }
  fit_scope(const fit_scope&) = delete;
  fit_scope& operator=(const fit_scope&) = delete;
  ~fit_scope() { busy_.store(false, std::memory_order_release); }

private:
  std::atomic<bool>& busy_;
};

/// A replica's evaluation of a data set (checked, not empty) on its device, in batches of 1000:
/// each batch gathered once, then its mean loss in evaluation mode (weighted by its rows) and/or
/// its correct predictions counted. One instantiation per device, whatever the policy and list.
struct evaluation {
  double loss = std::numeric_limits<double>::quiet_NaN();
  double accuracy = std::numeric_limits<double>::quiet_NaN();
};
template <device H>
evaluation evaluate_replica(const replica<H>& model, const data::labelled_images& data, bool loss, bool accuracy,
                    const char* what) {
  if (data.size() == 0) throw config_error(std::string("locus: ") + what + ": the data set is empty");
  std::vector<std::uint32_t> order(data.size());
  std::iota(order.begin(), order.end(), 0u);
  double total = 0;
  std::size_t correct = 0;
  for (std::size_t first = 0; first < data.size(); first += 1000) {
    const std::size_t count = std::min<std::size_t>(1000, data.size() - first);
    auto [x, y] = data::gather<H>(data, order, first, count);
    if (loss) total += model.loss(x, y) * double(count);
    if (accuracy) {
      const auto pred = model.predict(x).to_vector();
      const auto labels = y.labels.to_vector();
      for (std::size_t i = 0; i < count; ++i) correct += pred[i] == labels[i];
    }
  }
  evaluation e;
  if (loss) e.loss = total / double(data.size());
  if (accuracy) e.accuracy = double(correct) / double(data.size());
  return e;
}
}  // namespace detail

namespace detail {
/// The body of data_parallel<Policy, Ds...>: everything but the typed surface, over the replica set
/// Set (replica_set_for<Kind, Ds...>), so that data_parallel<P, gpu<0>, gpu<1>> and
/// data_parallel<P, gpu<0>, ..., gpu<3>> share one fit, one checkpoint path, one evaluation.
template <class Policy, class Set>
class trainer {
public:
  static constexpr bool distributed = Set::communicator_type::spans_processes;
  trainer(const trainer&) = delete;
  trainer& operator=(const trainer&) = delete;
  /// Out of line: one copy per policy and replica set, not one inlined into every data_parallel
  /// over a device list.
  ~trainer();

  /// Trains on `data`; returns the loss curve. TF-style progress lines through options.print.
  /// Everything (data, options, the policy's options) is checked before the first step.
  fit_result fit(const data::labelled_images& data, const fit_options& options);

  /// The trainer's state: the parameters, the optimiser's name and every replica's optimiser state
  /// and step count, the steps done by the last fit and its seed.
  [[nodiscard]] checkpoint state() const;
  /// Writes state() to path (a temporary file, flushed, renamed over path).
  void save(const std::string& path) const { state().save(path); }
  /// Reads a checkpoint written by save() for the same model and optimiser on as many devices (or
  /// an sgd checkpoint of format version 1). Everything is checked before anything changes: on any
  /// error (checkpoint_error naming the file and what is wrong) the trainer is untouched.
  void load(const std::string& path) { restore(checkpoint::load(path), path); }
  void restore(const checkpoint& c, const std::string& name);

  /// This process's rank in the job and the number of ranks (0 and 1 in process).
  [[nodiscard]] int rank() const noexcept { return set_->comm().rank(); }
  [[nodiscard]] int ranks() const noexcept { return set_->comm().size(); }
  /// Replicas over all ranks: ranks() x the devices of each.
  [[nodiscard]] std::size_t replica_count() const noexcept { return set_->replica_count(); }
  /// The number of parameters, all tensors together.
  [[nodiscard]] std::size_t parameter_count() const noexcept { return set_->parameter_count(); }
  /// The policy and its options.
  [[nodiscard]] const Policy& policy() const noexcept { return policy_; }
  /// The replicas, their buffers and the communicator (for benchmarks and policies' tests).
  [[nodiscard]] Set& replicas() noexcept { return *set_; }
  [[nodiscard]] const Set& replicas() const noexcept { return *set_; }
  /// The communicator in use ("in_process", "nccl", "mpi").
  [[nodiscard]] std::string communicator_name() const { return set_->comm().name(); }

  /// The parameters of replica 0 (after fit: every replica's, or hogwild's home copy), flat, in the
  /// model's for_each order.
  [[nodiscard]] std::vector<float> parameters() const { return set_->parameters(); }

  /// Writes the trained parameters into p, a parameter set of the same model on any device.
  template <parameter_set P>
  void parameters_into(P& p) const {
    // From replica 0's tensors to p's, device to device (inside replica 0's scope), after every
    // tensor's size is checked: nothing is written on a mismatch.
    set_->home([&](const auto& r) {
      const auto& src = r.model().parameters();
      std::size_t index = 0;
      p.for_each([&](const auto& v) {
        if (index >= src.size() || v.size() != src[index].size())
          throw shape_error("locus: parameters_into: tensor " + std::to_string(index) + " of " +
                            std::to_string(v.size()) + " elements does not match the trained model");
        ++index;
      });
      if (index != src.size()) throw shape_error("locus: parameters_into: the parameter set has too few tensors");
      index = 0;
      p.for_each([&](const auto& v) {
        using V = std::remove_cvref_t<decltype(v)>;
        locus::transfer(tensor_view<float, typename V::device_type, 1>(v.data(), shape{v.size()}), src[index]);
        ++index;
      });
    });
  }

  /// Accuracy on a data set, evaluated on the first device in batches of 1000. A model trained on
  /// float targets has none (config_error: use mean_loss).
  [[nodiscard]] double accuracy(const data::labelled_images& data) const;

  /// The model's mean loss over a data set in evaluation mode (dropout off; the model's loss(p, x,
  /// y), see model.hpp), on the first device in batches of 1000. Classifiers and models trained on
  /// float targets alike; the data set is checked as fit checks it.
  [[nodiscard]] double mean_loss(const data::labelled_images& data) const;

  /// sync_average's exchange alone, on the flat buffers as they are: every buffer := the mean of
  /// all replicas' (gradient, loss, failure slot). Collective across ranks; for benchmarks.
  void average_gradients();

protected:
  explicit trainer(Policy policy) : policy_(std::move(policy)) {}
  /// The replicas and what fit checks the data against (data_parallel's constructor).
  void emplace(std::unique_ptr<Set> set, std::int64_t classes, bool values, bool evaluates) {
    set_ = std::move(set);
    classes_ = classes;
    values_ = values;
    evaluates_ = evaluates;
  }

private:
  /// Every parameter tensor's extents (the model's layout).
  [[nodiscard]] std::vector<std::vector<std::uint64_t>> shapes() const {
    return set_->home([](const auto& r) { return r.model().shapes(); });
  }

  /// A fit on another thread changes the parameters under the evaluation: refused (on the fit's
  /// own thread, from on_epoch or on_step, the replicas are between two steps).
  void check_not_fitting_elsewhere(const char* what) const {
    if (fitting_.load(std::memory_order_acquire) && fit_thread_.load(std::memory_order_acquire) != std::this_thread::get_id())
      throw config_error(std::string("locus: ") + what + ": this trainer is in fit() on another thread; call it after "
                         "fit, or from fit's on_epoch or on_step");
  }

  void restore_unchecked(const checkpoint& c, const std::string& name);

  /// The checkpoint to resume from, when options name one that exists.
  /// The checkpoint to resume from, when options name one that exists. Across ranks, rank 0's
  /// (the one that writes them) is sent to every rank: all resume from the same state, whatever
  /// each rank's own file system holds.
  void resume(const fit_options& o, std::size_t total, fit_result& result);

  /// Across ranks: every rank's run must have rank 0's shape (the same steps, batches, model size
  /// and the options that decide the collectives), or they would wait for each other forever.
  /// Collective; every rank throws the same config_error naming what differs.
  void compare_runs(const data::labelled_images& data, const fit_options& o, std::size_t total);
  void save_checkpoint(const fit_options& o) {
    if (!o.checkpoint_path.empty() && rank() == 0) save(o.checkpoint_path);
  }

  Policy policy_;
  std::unique_ptr<Set> set_;
  std::atomic<bool> fitting_{false};  ///< a fit (or a restore) is running
  /// Labels must lie in [0, classes_): the model's classes() where it has one; else any int32 label
  /// of 0 or more (a bound no int32 reaches).
  std::int64_t classes_ = std::numeric_limits<std::int64_t>::max();
  bool values_ = false;     ///< the model trains on float targets (M::target_type is float)
  bool evaluates_ = false;  ///< the model has an evaluation-mode loss (model.hpp, detail::evaluates)
  /// The thread of the fit in progress (none: std::thread::id{}): mean_loss and accuracy refuse
  /// other threads meanwhile.
  std::atomic<std::thread::id> fit_thread_{};
  std::size_t steps_done_ = 0;  ///< by the last fit, counting the steps a checkpoint had done
  std::uint64_t seed_ = 0;      ///< of the last fit
};

// The members out of the class: not inline, so that a separate-runtime program's files call the
// prebuilt trainers (LOCUS_DETAIL_PREBUILT, below) instead of compiling them again.
template <class Policy, class Set>
trainer<Policy, Set>::~trainer() = default;

template <class Policy, class Set>
fit_result trainer<Policy, Set>::fit(const data::labelled_images& data, const fit_options& options) {
  // One fit at a time: a second thread's fit (or a fit, load or restore from on_step or print)
  // would race with the replicas' threads and buffers.
  const detail::fit_scope scope(fitting_, "fit");
  fit_thread_.store(std::this_thread::get_id(), std::memory_order_release);
  struct forget_thread {
    std::atomic<std::thread::id>& id;
    ~forget_thread() { id.store(std::thread::id{}, std::memory_order_release); }
  } const forget{fit_thread_};
  auto& comm = set_->comm();
  // Everything that can refuse the run is checked before the first step. Across ranks each rank
  // checks, then they agree: a refusal on one rank (a label out of range, a checkpoint folder
  // missing on rank 0, which writes them) is every rank's, and none waits in a collective.
  fit_options o;
  std::size_t total = 0;
  dist::agree(comm, [&] {
    detail::check_fit_data(data, options.batch, classes_, values_);
    o = detail::with_recipe(policy_, options);
    detail::check_clip_norm(o.clip_norm, Policy::name, detail::clips_gradients<Policy>);
    detail::check_epochs(o, data, Policy::name, detail::checkpoints_during_fit<Policy>, classes_, values_,
                         evaluates_);
    detail::check_options(policy_, o, *set_);
    total = total_steps(data.size(), o);
    if (!o.checkpoint_path.empty())
      detail::check_checkpointing(o.checkpoint_path, Policy::name, detail::checkpoints_during_fit<Policy>,
                                  set_->optimizer(), shapes(), rank());
  });
  if constexpr (distributed) compare_runs(data, o, total);
  const auto start = std::chrono::steady_clock::now();
  fit_result result;
  seed_ = o.seed;
  if constexpr (detail::checkpoints_during_fit<Policy>) resume(o, total, result);
  const bool prints = rank() == 0 || o.print_on_every_rank;
  detail::reporter report(o, total, set_->device_count(), prints);
  report.resume_at(result.resumed_from);
  fit_context<Set> c{*set_, data, o, total, result.resumed_from, result, report, {}, {}};
  if (o.validation || o.on_epoch) {
    // Replica 0 holds every replica's parameters between steps (a policy with checkpoints).
    c.epoch_done = [&](std::size_t epoch, std::size_t steps, double loss) {
      epoch_summary e;
      e.epoch = epoch;
      e.step = steps;
      e.loss = loss;
      if (o.validation) {
        const auto v = set_->home([&](const auto& r) {
          return detail::evaluate_replica(r.model(), *o.validation, true, !values_, "fit: validation");
        });
        e.validation_loss = v.loss;
        e.validation_accuracy = v.accuracy;
      }
      result.history.push_back(e);
      if (prints && o.print && o.log_every != 0) o.print(detail::epoch_line(e, o.validation != nullptr, !values_));
      return o.on_epoch && !o.on_epoch(e);
    };
  }
  if constexpr (detail::checkpoints_during_fit<Policy>) {
    c.after_step = [&](std::size_t steps) {
      steps_done_ = steps;
      if (o.checkpoint_every != 0 && steps % o.checkpoint_every == 0) save_checkpoint(o);
    };
  }
  result.steps = result.resumed_from;
  // GPU replicas keep the training set for the fit (fit_options::data_on_device_limit), freed when
  // it ends (also when an upload fails part-way).
  struct drop_data_after {
    Set& set;
    ~drop_data_after() {
      try {
        set.drop_data();
      } catch (...) {  // freeing device memory: nothing to report over a fit's own outcome
      }
    }
  } drop_after{*set_};
  set_->keep_data(data, o.data_on_device_limit);
  try {
    policy_.run(c);
  } catch (const detail::stop_fit&) {
    // on_epoch: the fit ends after a whole step, as at its end (at the last step: not early).
    result.stopped_early = result.steps < total;
  }
  steps_done_ = result.steps;
  // The last checkpoint, and across ranks what failed on one rank after the last exchange (its
  // on_step, its checkpoint): every rank ends the fit the same way, as an exchange ends it.
  if constexpr (!distributed) {
    if constexpr (detail::checkpoints_during_fit<Policy>)
      if (!result.stopped) save_checkpoint(o);
  } else {
    std::string failure = c.failure;
    try {
      if constexpr (detail::checkpoints_during_fit<Policy>)
        if (failure.empty() && !result.stopped) save_checkpoint(o);
    } catch (...) {
      failure = dist::describe(std::current_exception());
    }
    if (const auto first = comm.first_failure(failure); !first.empty()) throw error(first);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.examples = result.curve.size() * o.batch;
  return result;
}

template <class Policy, class Set>
checkpoint trainer<Policy, Set>::state() const {
  checkpoint c;
  c.steps = steps_done_;
  c.seed = seed_;
  c.shapes = shapes();
  c.parameters = set_->parameters();
  c.optimizer = set_->optimizer().name;
  c.state_buffers = set_->optimizer().state_buffers;
  c.optimizer_steps = set_->optimizer_steps();
  c.optimizer_state = set_->states_host();
  c.streams = set_->draws();
  if (const auto* scaler = set_->scaler()) {
    c.loss_scale = scaler->scale();
    c.loss_scale_steps = scaler->clean();
  }
  return c;
}

template <class Policy, class Set>
void trainer<Policy, Set>::restore(const checkpoint& c, const std::string& name) {
  const detail::fit_scope scope(fitting_, "restore");
  restore_unchecked(c, name);
}

template <class Policy, class Set>
double trainer<Policy, Set>::accuracy(const data::labelled_images& data) const {
  check_not_fitting_elsewhere("accuracy");
  if (values_)
    throw config_error("locus: accuracy: the model trains on float targets (regression): accuracy counts classes; "
                       "use mean_loss(data)");
  detail::check_labelled("accuracy", data, classes_);
  return set_->home([&](const auto& r) { return detail::evaluate_replica(r.model(), data, false, true, "accuracy"); })
      .accuracy;
}

template <class Policy, class Set>
double trainer<Policy, Set>::mean_loss(const data::labelled_images& data) const {
  check_not_fitting_elsewhere("mean_loss");
  detail::check_evaluates("mean_loss", evaluates_);
  detail::check_labelled("mean_loss", data, classes_, values_);
  return set_->home([&](const auto& r) { return detail::evaluate_replica(r.model(), data, true, false, "mean_loss"); })
      .loss;
}

template <class Policy, class Set>
void trainer<Policy, Set>::average_gradients() {
  auto& s = *set_;
  s.comm().all_reduce_sum(s.buffers(s.parameter_count() + Set::extra));
  const float mean = 1.f / float(s.replica_count());
  s.each([&](auto& r) {
    auto& g = r.buffer();
    g = g * mean;
  });
}

template <class Policy, class Set>
void trainer<Policy, Set>::restore_unchecked(const checkpoint& c, const std::string& name) {
  const bool drop = detail::check_restore(c, name, shapes(), parameter_count(), set_->optimizer(),
                                          set_->device_count(), set_->state_size());
  set_->set_parameters(c.parameters);
  set_->set_states(drop ? std::vector<std::vector<float>>{} : c.optimizer_state,
                   drop ? std::vector<std::uint64_t>{} : c.optimizer_steps);
  set_->set_draws(c.streams);
  // float16's loss scale: the checkpoint's, or (none saved: a float, bfloat16 or format 3 run) the
  // initial one.
  if (auto* scaler = set_->scaler())
    scaler->restore(c.loss_scale > 0 ? c.loss_scale : detail::loss_scaler::initial_scale,
                    c.loss_scale > 0 ? c.loss_scale_steps : 0);
  steps_done_ = c.steps;
  seed_ = c.seed;
}

template <class Policy, class Set>
void trainer<Policy, Set>::resume(const fit_options& o, std::size_t total, fit_result& result) {
  if (o.checkpoint_path.empty()) return;
  auto& comm = set_->comm();
  std::optional<checkpoint> c;
  dist::agree(comm, [&] {
    if (rank() != 0) return;
    if (std::FILE* f = std::fopen(o.checkpoint_path.c_str(), "rb")) std::fclose(f);
    else return;
    c = checkpoint::load(o.checkpoint_path);
  });
  if constexpr (distributed) {
    std::vector<std::uint8_t> bytes;
    if (c) bytes = c->serialize();
    dist::broadcast_bytes(comm, bytes);
    dist::agree(comm, [&] {
      if (!bytes.empty() && rank() != 0)
        c = checkpoint::parse(bytes.data(), bytes.size(), o.checkpoint_path + " (rank 0's)");
    });
  }
  dist::agree(comm, [&] {
    if (!c) return;
    if (c->seed != o.seed)
      throw checkpoint_error("locus: checkpoint " + o.checkpoint_path + ": written with seed " +
                             std::to_string(c->seed) + ", this fit has seed " + std::to_string(o.seed) +
                             " (another data order)");
    // More steps done than this whole fit has: another batch size, fewer epochs or max_steps.
    if (c->steps > total)
      throw checkpoint_error("locus: checkpoint " + o.checkpoint_path + ": " + std::to_string(c->steps) +
                             " steps done, past the end of this fit (" + std::to_string(total) +
                             " steps in all): written by a run with another batch, epochs or max_steps");
    restore_unchecked(*c, o.checkpoint_path);
    result.resumed_from = std::size_t(c->steps);
  });
}

template <class Policy, class Set>
void trainer<Policy, Set>::compare_runs(const data::labelled_images& data, const fit_options& o, std::size_t total) {
  std::vector<std::pair<std::string, std::uint64_t>> fields = {
      {"batches per epoch", data.size() / o.batch},
      {"epochs", o.epochs},
      {"batch", o.batch},
      {"max_steps", o.max_steps},
      {"steps", total},
      {"seed", o.seed},
      {"parameters", parameter_count()},
      {"devices per rank", set_->device_count()},
      {"checkpoint_every", o.checkpoint_every},
      {"checkpoint_path given", o.checkpoint_path.empty() ? 0u : 1u},
      {"on_non_finite", std::uint64_t(o.on_non_finite)},
      {"clip_norm (its float's bits)", std::bit_cast<std::uint32_t>(o.clip_norm)},
      {"warmup_steps", o.warmup_steps.value_or(0)},
      {"schedule", std::uint64_t(o.schedule.value_or(lr_schedule::constant))},
      {"epochs evaluated (validation or on_epoch given)", (o.validation || o.on_epoch) ? 1u : 0u},
  };
  if constexpr (requires { policy_.agreement(); })
    for (auto& [name, value] : policy_.agreement()) fields.emplace_back(std::string(Policy::name) + "." + name, value);
  dist::agree_on_values(set_->comm(), fields, "locus: fit: the ranks disagree on the run",
                        ": every rank must call fit with the same model, data size and options");
}

/// The replica set of data_parallel<Policy, Ds...>; a stand-in where the policy or the list is
/// refused (its static_assert speaks, not a cascade of errors).
template <bool Valid, class Policy, class... Ds>
struct trainer_set {
  using type = replica_set<dist::any_group<false, false>, cpu>;
};
template <class Policy, class... Ds>
struct trainer_set<true, Policy, Ds...> {
  using type = replica_set_for<typename Policy::communicator, Ds...>;
};
/// data_parallel<Policy, Ds...>'s static_asserts hold.
template <class Policy, class... Ds>
inline constexpr bool trainer_valid = sizeof...(Ds) >= 1 && (device<Ds> && ...) && all_distinct<Ds...>::value &&
                                      policy_shape<Policy> && std::copy_constructible<Policy> &&
                                      (!std::is_same_v<typename communicator_of<Policy>::type, dist::mpi> ||
                                       LOCUS_HAS_MPI);
template <class Policy, class... Ds>
using trainer_set_t = typename trainer_set<trainer_valid<Policy, Ds...>, Policy, Ds...>::type;
}  // namespace detail

template <class Policy, class... Ds>
class data_parallel : public detail::trainer<Policy, detail::trainer_set_t<Policy, Ds...>> {
  using base = detail::trainer<Policy, detail::trainer_set_t<Policy, Ds...>>;

  static_assert(sizeof...(Ds) >= 1, "locus: data_parallel<Policy, Devices...> needs at least one device");
  static_assert((device<Ds> && ...),
                "locus: data_parallel<Policy, Devices...>: every device must be locus::cpu or locus::gpu<N>");
  static_assert(detail::all_distinct<Ds...>::value,
                "locus: data_parallel<Policy, Devices...>: a device appears twice in the list");
  // What a policy lacks, one message each: a move-only policy is told it is move-only, not that it
  // lacks a name.
  static_assert(detail::policy_shape<Policy>,
                "locus: data_parallel<Policy, ...>: Policy is not a training policy: it needs a static `name`, a "
                "communicator kind `communicator` and run(fit_context&) (see locus::train::policy in "
                "locus/train/policy.hpp; built in: sync_average, hogwild, local_sgd)");
  static_assert(!detail::policy_shape<Policy> || std::copy_constructible<Policy>,
                "locus: data_parallel<Policy, ...>: Policy must be copyable: the trainer keeps a copy of it with its "
                "options (a member such as std::unique_ptr makes it move-only; hold shared state by std::shared_ptr)");
  static_assert(!std::is_same_v<typename detail::communicator_of<Policy>::type, dist::mpi> || LOCUS_HAS_MPI,
                "locus: data_parallel<mpi<...>, ...> needs MPI: this build has no <mpi.h> (install libopenmpi-dev, "
                "find_package(MPI) and link MPI::MPI_CXX)");

public:
  using set_type = detail::trainer_set_t<Policy, Ds...>;
  static constexpr std::size_t device_count = sizeof...(Ds);
  /// True when the replicas of every process of a job train together (mpi<P>, nccl<P> under mpirun).
  static constexpr bool distributed = set_type::communicator_type::spans_processes;
  /// The first device of the list: replica 0's, which evaluates (accuracy, mean_loss, validation).
  using home_device = std::tuple_element_t<0, std::tuple<Ds...>>;

  /// One replica of `model` per device, all starting from the first device's initial parameters
  /// (rank 0's across processes), trained by the optimiser `opt` (sgd, adam, adamw or any type
  /// meeting train::optimizer, optimizer.hpp; validated here); `policy` carries the policy's options.
  template <class M, class Opt = sgd>
  data_parallel(const M& model, Opt opt, Policy policy = {}) : base(std::move(policy)) {
    // The requirement M misses, each in a message of its own (evaluated here, first: the compiler
    // may leave later instantiations alone once an error is reported); what params<D>::for_each
    // hands its callable, which the concept cannot see, is checked there too (f(W1) instead of
    // f(W1.view()) is one line).
    [[maybe_unused]] constexpr bool meets_each_requirement = (detail::check_model<M, core_device_t<Ds>>() && ...);
    static_assert((model_on<M, core_device_t<Ds>> && ...),
                  "locus: data_parallel: the model does not meet the model interface on every device of the list "
                  "(see locus::train::model_on<M, D> in locus/train/model.hpp)");
    static_assert(optimizer<Opt>,
                  "locus: data_parallel: the optimiser does not meet locus::train::optimizer: it needs a static "
                  "`name`, `lr`, validate(), state_buffers() and kernel(step_args, tensor_state) (see "
                  "locus/train/optimizer.hpp; built in: sgd, adam, adamw)");
    if constexpr (detail::trainer_valid<Policy, Ds...> && (model_on<M, core_device_t<Ds>> && ...) && optimizer<Opt>) {
      std::int64_t classes = std::numeric_limits<std::int64_t>::max();
      if constexpr (requires { model.classes(); }) classes = static_cast<std::int64_t>(model.classes());
      this->emplace(detail::make_replica_set<typename Policy::communicator, Ds...>(model, opt), classes,
                    trains_on_values<M>, (detail::evaluates<M, core_device_t<Ds>> && ...));
    }
  }

  /// Trains on `data`; returns the loss curve. TF-style progress lines through options.print.
  /// Everything (data, options, the policy's options) is checked before the first step.
  fit_result fit(const data::labelled_images& data, const fit_options& options) {
    static_assert(policy_for<Policy, Ds...> || !detail::runs_if_mutable<Policy, Ds...>,
                  "locus: data_parallel: Policy::run(fit_context&) must be a const member function (a policy's "
                  "options do not change during a fit; keep run-time state in locals or behind a std::shared_ptr)");
    static_assert(policy_for<Policy, Ds...> || detail::runs_if_mutable<Policy, Ds...>,
                  "locus: data_parallel: the policy has no run(fit_context&) for these devices");
    if constexpr (policy_for<Policy, Ds...>) return base::fit(data, options);
    else return {};
  }
};

}  // namespace locus::train

// The built-in policies' trainers over the in-process communicators, for every kind of replica set
// (the cpu, GPUs, both), compiled once, in the run-time file, in a separate-runtime program
// (config.hpp, LOCUS_DETAIL_PREBUILT): the program's own files then compile a data_parallel's
// typed surface and constructor only. mpi<P> and nccl<P> trainers are compiled where they are used.
#ifdef LOCUS_DETAIL_PREBUILT
#  define LOCUS_DETAIL_PREBUILT_TRAINERS(...)                                                                   \
    LOCUS_DETAIL_PREBUILT class detail::trainer<sync_average, replica_set<dist::any_group<false, false>, __VA_ARGS__>>; \
    LOCUS_DETAIL_PREBUILT class detail::trainer<hogwild, replica_set<dist::any_group<false, false>, __VA_ARGS__>>;      \
    LOCUS_DETAIL_PREBUILT class detail::trainer<local_sgd, replica_set<dist::any_group<false, false>, __VA_ARGS__>>;
namespace locus::train {
LOCUS_DETAIL_PREBUILT_TRAINERS(cpu)
#  if LOCUS_HAS_GPUS
LOCUS_DETAIL_PREBUILT_TRAINERS(any_gpu)
LOCUS_DETAIL_PREBUILT_TRAINERS(cpu, any_gpu)
#  endif
}  // namespace locus::train
#  undef LOCUS_DETAIL_PREBUILT_TRAINERS
#endif
