#pragma once
// The replicas of one model on the devices of a process, with what a policy works on: each
// replica's parameters and gradient (model.hpp), a flat buffer per replica (the gradient, or the
// parameters, plus two slots: the loss and a failure flag travel with them through one all-reduce),
// each replica's optimiser state and step count, the optimiser (its type erased: data_parallel's
// type names the policy and the devices only), and the communicator group of the policy's kind.
// Policies see the trainer only through this class (and fit_context, policy.hpp).
//
// Below the typed surface: data_parallel<P, gpu<0>, gpu<1>> checks its devices at compile time,
// and its replica set holds them as a run-time list, its code compiled once per kind of device
// (cpu, any_gpu), so that a policy's run() is the same function for one GPU or eight.
#include <locus/config.hpp>
#include <locus/backend/parallel.hpp>
#include <locus/data/resident.hpp>
#include <locus/device/device.hpp>
#include <locus/dist/agreement.hpp>
#include <locus/dist/communicator.hpp>
#include <locus/errors.hpp>
#include <locus/expr/operators.hpp>
#include <locus/ops/reduce.hpp>
#include <locus/placement/on.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/tensor/transfer.hpp>
#include <locus/train/layout.hpp>
#include <locus/train/loss_scale.hpp>
#include <locus/train/model.hpp>
#include <locus/train/optimizer.hpp>
#include <locus/train/runner.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace locus::train {

/// What a policy may know of the trainer's optimiser, whatever its type.
struct optimizer_info {
  std::string name;                ///< O::name ("sgd", "adam", "adamw")
  float lr = 0.f;                  ///< the base learning rate
  std::size_t state_buffers = 0;   ///< state floats per parameter
  std::optional<sgd> sgd_options;  ///< the options when it is sgd (hogwild's momentum path reads them)
};

template <class Comm, device... Cs>
class replica_set;

namespace detail {
/// An optimiser's step on one kind of device, its type erased (one per kind, shared by its replicas).
template <device C>
using step_function = std::function<void(float lr, std::uint64_t step, const std::vector<tensor_view<float, C, 1>>&,
                                         const std::vector<tensor_view<const float, C, 1>>&,
                                         const tensor_view<float, C, 1>&, float scale)>;
/// The optimiser's step on C (cpu or any_gpu; called inside the replica's device_scope): its
/// kernels compiled once per optimiser and kind of device.
template <device C, optimizer O>
step_function<C> step_function_of(const O& opt) {
  return [opt](float lr, std::uint64_t step, const std::vector<tensor_view<float, C, 1>>& p,
               const std::vector<tensor_view<const float, C, 1>>& g, const tensor_view<float, C, 1>& s,
               float scale) { apply_step<O, C>(opt, lr, step, p, g, s, scale); };
}

/// An optimiser, validated, as replica_set keeps it: what policies may know of it and its step on
/// each kind of device. Made by erase_optimizer, the only part of a replica_set's construction that
/// depends on the optimiser's type.
template <device... Cs>
struct erased_optimizer {
  optimizer_info info;
  std::tuple<step_function<Cs>...> steppers;
};
template <device... Cs, optimizer O>
erased_optimizer<Cs...> erase_optimizer(const O& opt) {
  opt.validate();
  erased_optimizer<Cs...> e;
  e.info.name = O::name;
  e.info.lr = opt.lr;
  e.info.state_buffers = opt.state_buffers();
  if constexpr (std::is_same_v<O, sgd>) e.info.sgd_options = opt;
  if (e.info.state_buffers > max_state_buffers)
    throw config_error("locus: " + e.info.name + ": " + std::to_string(e.info.state_buffers) +
                       " state buffers per parameter, at most " + std::to_string(max_state_buffers));
  e.steppers = std::tuple<step_function<Cs>...>{step_function_of<Cs>(opt)...};
  return e;
}

/// A replica of `model` on C (inside a device_scope of its device).
template <class M, device C>
LOCUS_NOINLINE std::unique_ptr<replica<C>> make_replica(const std::shared_ptr<const M>& model) {
  return std::make_unique<replica_of<M, C>>(model);
}
/// n zeros on D.
template <device D>
LOCUS_NOINLINE tensor<float, D, 1> zeros(std::size_t n) {
  return tensor<float, D, 1>(shape{n}, 0.f);
}

/// Writes the largest magnitude of each of the views into out[0], out[1], ... on D (one reduction
/// each, no read; 0 for an empty view): NaN when an element is NaN (max lets NaN win), infinite
/// when one is, and never an overflow (a sum would: 32 elements of 2e38 are finite, their float
/// sum is not). The callers read them with their other values in one copy: one host wait.
template <device D, class Views>
void largest_magnitudes(float* out, const Views& views) {
  for (const auto& v : views) {
    const tensor_view<float, D, 0> largest(out++, locus::shape<0>{});
    if (v.size() == 0) largest.fill(0.f);
    else largest = max(abs(v));
  }
}
/// True when every one of the host values [first, last) is finite.
[[nodiscard]] inline bool all_finite_values(const float* first, const float* last) {
  return std::all_of(first, last, [](float m) { return std::isfinite(m); });
}

/// True when every element of the views is finite, read in one copy (largest_magnitudes); no read
/// when there is no element.
template <device D, class Views>
[[nodiscard]] bool all_finite(const Views& views) {
  if (std::all_of(std::begin(views), std::end(views), [](const auto& v) { return v.size() == 0; })) return true;
  auto t = tensor<float, D, 1>::uninitialized_of(shape{std::size(views)});
  largest_magnitudes<D>(t.data(), views);
  const std::vector<float> read = t.to_vector();
  return all_finite_values(read.data(), read.data() + read.size());
}

/// r.loss_and_grad(x, y), and whether its loss and every element of its gradient are finite, in
/// one read to the host (one host wait, where reading the loss and checking the gradient are two).
template <device D>
[[nodiscard]] std::pair<double, bool> checked_loss_and_grad(replica<D>& r, const tensor<float, D, 2>& x,
                                                            const data::targets<D>& y) {
  auto t = tensor<float, D, 1>::uninitialized_of(shape{1 + r.parameters().size()});
  r.loss_and_grad_into(x, y, tensor_view<float, D, 0>(t.data(), locus::shape<0>{}));
  largest_magnitudes<D>(t.data() + 1, r.gradients());
  const std::vector<float> read = t.to_vector();
  return {double(read[0]), all_finite_values(read.data(), read.data() + read.size())};
}

/// What a synchronous step reads of its gradient (step_summary).
struct step_read {
  float loss = 0;       ///< slot n of the flat buffer
  bool failed = false;  ///< slot n + 1 set: a rank failed
  bool finite = true;   ///< every element of the gradient's views finite
};

/// A flat buffer's slots n and n + 1 (the loss, the failure flag) and the largest magnitude of each
/// of the views (NaN when one of its elements is NaN), in one copy to the host: a step's one host
/// wait, where reading each would be one wait each.
template <device D, class Views>
[[nodiscard]] step_read step_summary(const tensor<float, D, 1>& g, std::size_t n, const Views& views) {
  auto t = tensor<float, D, 1>::uninitialized_of(shape{2 + std::size(views)});
  backend::copy(id_of<D>, t.data(), id_of<D>, g.data() + n, 2 * sizeof(float));
  largest_magnitudes<D>(t.data() + 2, views);
  const std::vector<float> read = t.to_vector();
  return {read[0], read[1] > 0.f, all_finite_values(read.data() + 2, read.data() + read.size())};
}

/// The sum of the squares of every element of the views, in double (one reduction each, on their
/// device): the squared L2 norm of a gradient held in several tensors.
template <device D, class Views>
[[nodiscard]] double squared_norm(const Views& views) {
  double total = 0;
  for (const auto& v : views)
    if (v.size() != 0) total += on<D>(sum(cast<double>(v) * cast<double>(v))).item();
  return total;
}

/// Writes the host floats `values` into t from element k on.
template <device D>
void set_slots(tensor<float, D, 1>& t, std::size_t k, std::initializer_list<float> values) {
  locus::transfer(tensor_view<float, D, 1>(t.data() + k, shape{values.size()}),
                  tensor_view<const float, cpu, 1>(values.begin(), shape{values.size()}));
}
/// One element of a device buffer, on the host.
template <device D>
[[nodiscard]] float slot(const tensor<float, D, 1>& t, std::size_t k) {
  float v = 0;
  locus::transfer(tensor_view<float, cpu, 1>(&v, shape{1}), tensor_view<const float, D, 1>(t.data() + k, shape{1}));
  return v;
}

[[noreturn]] LOCUS_RUNTIME_INLINE void throw_no_replica(std::size_t i, std::size_t count);
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_kind_not_in_set(device_id d, const std::string& kinds);
#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE void throw_kind_not_in_set(device_id d, const std::string& kinds) {
  throw config_error("locus: replica_set: " + d.full_name() + " is not of the set's kinds of device (" + kinds.substr(1) +
                     "); make the set with replica_set_for<Kind, Devices...>");
}
LOCUS_RUNTIME_INLINE void throw_no_replica(std::size_t i, std::size_t count) {
  throw config_error("locus: replica_set: replica " + std::to_string(i) + " of a set of " + std::to_string(count) +
                     " (this process's replicas count from 0)");
}
#endif

/// The distinct kinds of device (cpu, any_gpu) of a device list, the cpu first: what a replica set
/// over that list is compiled for.
template <class Comm, bool Cpu, bool Gpu>
struct set_of_kinds;
template <class Comm>
struct set_of_kinds<Comm, true, false> {
  using type = replica_set<Comm, cpu>;
};
template <class Comm>
struct set_of_kinds<Comm, false, true> {
  using type = replica_set<Comm, any_gpu>;
};
template <class Comm>
struct set_of_kinds<Comm, true, true> {
  using type = replica_set<Comm, cpu, any_gpu>;
};
}  // namespace detail

/// One replica of a replica_set as a policy works with it, on the kind of device C (cpu, or
/// any_gpu for every gpu<N>): the model's replica, its flat buffer, its optimiser state and step
/// count. replica_set::run, each, at and home hand it to the policy's code inside a device_scope
/// of its device (code of any_gpu runs on that GPU); use it there only.
template <device C>
class replica_slot {
public:
  using device_type = C;

  /// This replica's index among this process's replicas (0 is the home replica).
  [[nodiscard]] std::size_t index() const noexcept { return index_; }
  /// Its device ("/gpu:1").
  [[nodiscard]] device_id device() const noexcept { return device_; }
  /// The model's replica: parameters, loss_and_grad, gradients (model.hpp).
  [[nodiscard]] train::replica<C>& model() noexcept { return *model_; }
  [[nodiscard]] const train::replica<C>& model() const noexcept { return *model_; }
  /// The flat buffer: parameter_count() + replica_set::extra floats.
  [[nodiscard]] tensor<float, C, 1>& buffer() noexcept { return buffer_; }
  /// The optimiser state, flat: state_buffers x parameter_count() floats, buffer after buffer
  /// (sgd: the momentum; Adam: the first moments, then the second).
  [[nodiscard]] tensor<float, C, 1>& state() noexcept { return state_; }
  [[nodiscard]] const tensor<float, C, 1>& state() const noexcept { return state_; }
  /// The optimiser steps this replica has taken.
  [[nodiscard]] std::uint64_t optimizer_steps() const noexcept { return steps_; }
  /// One optimiser step: the parameters from `grads` (views on this device, shaped like the
  /// parameters, scaled by `scale`) at the scheduled rate `lr`, with this replica's state and step
  /// count; one kernel per tensor.
  void step(float lr, const std::vector<tensor_view<const float, C, 1>>& grads, float scale = 1.f) {
    (*stepper_)(lr, steps_ + 1, model_->parameters(), grads, state_.view(), scale);
    ++steps_;  // after: a step that throws is not counted
  }
  /// The training set kept on this replica's device for the fit under way (data::resident), or
  /// null: its batches are gathered on the host (data::batch_of takes either).
  [[nodiscard]] data::resident<C>* rows() noexcept { return rows_ ? &*rows_ : nullptr; }
  /// The first n floats of the buffer (or the state), for the communicator.
  [[nodiscard]] dist::buffer_ref buffer_ref(std::size_t n) noexcept { return {device_, buffer_.data(), n}; }
  [[nodiscard]] dist::buffer_ref state_ref(std::size_t n) noexcept { return {device_, state_.data(), n}; }

private:
  template <class, ::locus::device...>
  friend class replica_set;

  std::size_t index_ = 0;
  device_id device_;
  std::unique_ptr<train::replica<C>> model_;
  tensor<float, C, 1> buffer_, state_;
  std::uint64_t steps_ = 0;
  const detail::step_function<C>* stepper_ = nullptr;
  std::optional<data::resident<C>> rows_;
};

/// The replicas of one model on this process's devices, known at run time, with the communicator
/// Comm (dist::any_group: the policy's communicator kind over the typed device list, its type
/// erased). Cs... are the kinds of device among them (cpu, any_gpu): a replica set over gpu<0> and
/// gpu<1> and one over gpu<0> to gpu<3> are the same type, and a policy's run() is compiled once
/// for both. data_parallel<Policy, Ds...> makes it (replica_set_for<Kind, Ds...>).
template <class Comm, device... Cs>
class replica_set {
  static_assert(sizeof...(Cs) >= 1);

public:
  using communicator_type = Comm;
  /// Slots after the parameters in each flat buffer: [n] the loss, [n + 1] a failure flag.
  static constexpr std::size_t extra = 2;
  /// Replicas run on threads of their own only when none of them shares the host's cores.
  static constexpr bool concurrent = (!backend::runs_on_host<Cs> && ...);

  /// One replica of `model` on each of `devices`, all starting from the first device's initial
  /// parameters (rank 0's across processes); `comm` is the communicator over them.
  template <class M, optimizer O>
  replica_set(std::unique_ptr<Comm> comm, const std::vector<device_id>& devices, const M& model, const O& opt)
      : replica_set(std::move(comm), devices, model, detail::erase_optimizer<Cs...>(opt)) {}

  [[nodiscard]] Comm& comm() noexcept { return *comm_; }
  [[nodiscard]] const Comm& comm() const noexcept { return *comm_; }
  /// The optimiser's name, base rate, state size and (for sgd) options.
  [[nodiscard]] const optimizer_info& optimizer() const noexcept { return info_; }
  /// The number of parameters, all tensors together.
  [[nodiscard]] std::size_t parameter_count() const noexcept { return size_; }
  /// This process's replicas (its devices), in the trainer's order.
  [[nodiscard]] std::size_t device_count() const noexcept { return devices_.size(); }
  [[nodiscard]] const std::vector<device_id>& devices() const noexcept { return devices_; }
  /// Replicas over all processes, and the global index of this process's first.
  [[nodiscard]] std::size_t replica_count() const noexcept { return std::size_t(comm_->size()) * device_count(); }
  [[nodiscard]] std::size_t first_replica() const noexcept { return std::size_t(comm_->rank()) * device_count(); }
  /// The floats of each replica's state.
  [[nodiscard]] std::size_t state_size() const noexcept { return info_.state_buffers * size_; }
  /// The model's dynamic loss scale (train::mixed<half>), or null: the policies skip a non-finite
  /// step under it whatever on_non_finite says, and tell it every step's outcome.
  [[nodiscard]] detail::loss_scaler* scaler() const noexcept { return scaler_.get(); }

  /// f(slot) for replica i's replica_slot<C>& inside a device_scope of its device; returns what f
  /// returns (the same type for every kind of device).
  template <class F>
  decltype(auto) at(std::size_t i, F&& f) {
    return visit(*this, i, f);
  }
  template <class F>
  decltype(auto) at(std::size_t i, F&& f) const {
    return visit(*this, i, f);
  }
  /// at(0, f): the home replica (the first device), which holds the result of a fit.
  template <class F>
  decltype(auto) home(F&& f) {
    return visit(*this, 0, f);
  }
  template <class F>
  decltype(auto) home(F&& f) const {
    return visit(*this, 0, f);
  }

  /// Runs f(slot) for every replica: on threads that stay when the replicas are GPUs, one after the
  /// other when they share the host's cores; each inside a device_scope of its device. Waits for
  /// all and rethrows the first failure.
  template <class F>
  void run(F&& f) {
    std::vector<std::function<void()>> work;
    work.reserve(device_count());
    for (std::size_t i = 0; i < device_count(); ++i)
      slot_visit(*this, i, [&](auto& slot) {
        work.push_back([&f, &slot] {
          const device_scope scope(slot.device());
          f(slot);
        });
      });
    if (concurrent && device_count() > 1) {
      if (!threads_) threads_ = std::make_unique<detail::replica_threads>();
      threads_->run(work);
    } else {
      detail::run_parallel(work, false);
    }
  }
  /// f(slot) for every replica, in turn, on this thread (each inside its device_scope).
  template <class F>
  void each(F&& f) {
    for (std::size_t i = 0; i < device_count(); ++i) visit(*this, i, f);
  }
  template <class F>
  void each(F&& f) const {
    for (std::size_t i = 0; i < device_count(); ++i) visit(*this, i, f);
  }

  /// Each replica whose device keeps `data` (data::keeps_resident under `limit` bytes: a GPU) gets
  /// a copy of it on its device for the fit (keep_data), which drop_data frees; the others take
  /// the host path. Uploads one replica after the other, each in its device scope.
  void keep_data(const data::labelled_images& data, std::size_t limit) {
    each([&](auto& slot) {
      using C = typename std::remove_cvref_t<decltype(slot)>::device_type;
      if (data::keeps_resident<C>(data, limit)) slot.rows_.emplace(data);
    });
  }
  void drop_data() {
    each([](auto& slot) { slot.rows_.reset(); });
  }

  /// Every replica's flat buffer (whole, or the first `n` floats), for the communicator.
  [[nodiscard]] dist::buffer_list buffers(std::size_t n) {
    dist::buffer_list out(device_count());
    for (std::size_t i = 0; i < device_count(); ++i) slot_visit(*this, i, [&](auto& r) { out[i] = r.buffer_ref(n); });
    return out;
  }
  /// Every replica's optimiser state, for the communicator (local_sgd averages it).
  [[nodiscard]] dist::buffer_list states() {
    dist::buffer_list out(device_count());
    for (std::size_t i = 0; i < device_count(); ++i)
      slot_visit(*this, i, [&](auto& r) { out[i] = r.state_ref(state_size()); });
    return out;
  }

  /// Replica 0's parameters, flat, on the host.
  [[nodiscard]] std::vector<float> parameters() const {
    return home([](const auto& r) { return to_host(r.model().parameters()); });
  }
  /// Every replica takes the flat parameters p.
  void set_parameters(const std::vector<float>& p) {
    each([&](auto& r) { from_host(p, r.model().parameters()); });
  }
  /// Every replica's optimiser state, on the host.
  [[nodiscard]] std::vector<std::vector<float>> states_host() const {
    std::vector<std::vector<float>> out;
    each([&](const auto& r) { out.push_back(r.state().view().to_vector()); });
    return out;
  }
  /// Every replica's optimiser step count.
  [[nodiscard]] std::vector<std::uint64_t> optimizer_steps() const {
    std::vector<std::uint64_t> out;
    each([&](const auto& r) { out.push_back(r.optimizer_steps()); });
    return out;
  }
  /// Every replica's random-stream position (replica::draws()).
  [[nodiscard]] std::vector<std::uint64_t> draws() const {
    std::vector<std::uint64_t> out;
    each([&](const auto& r) { out.push_back(r.model().draws()); });
    return out;
  }
  /// Every replica's stream position from `draws` (one per replica), or 0 when it is empty.
  void set_draws(const std::vector<std::uint64_t>& draws) {
    each([&](auto& r) { r.model().set_draws(draws.empty() ? 0 : draws[r.index()]); });
  }
  /// Every replica's state and step count from `states` and `steps` (one each per replica, each
  /// state of state_size() floats), or zero when both are empty. The caller has checked the sizes.
  void set_states(const std::vector<std::vector<float>>& states, const std::vector<std::uint64_t>& steps) {
    each([&](auto& r) {
      auto& mine = r.state();
      if (states.empty()) {
        if (state_size() != 0) mine = mine * 0.f;
      } else if (state_size() != 0) {
        from_host(states[r.index()], std::vector{mine.view()});
      }
      r.steps_ = steps.empty() ? 0 : steps[r.index()];
    });
  }

  /// True when every element of the views is finite (detail::all_finite).
  template <device D, class Views>
  [[nodiscard]] static bool all_finite(const Views& views) {
    return detail::all_finite<D>(views);
  }
  /// The sum of the squares of the views' elements, in double: a gradient's squared L2 norm.
  template <device D, class Views>
  [[nodiscard]] static double squared_norm(const Views& views) {
    return detail::squared_norm<D>(views);
  }
  /// One element of a device buffer, on the host.
  template <device D>
  [[nodiscard]] static float slot(const tensor<float, D, 1>& t, std::size_t k) {
    return detail::slot(t, k);
  }
  /// Writes the host floats `values` into t from element k on.
  template <device D>
  static void set_slots(tensor<float, D, 1>& t, std::size_t k, std::initializer_list<float> values) {
    detail::set_slots(t, k, values);
  }

private:
  static constexpr std::size_t kinds = sizeof...(Cs);
  template <std::size_t K>
  using kind_at = std::tuple_element_t<K, std::tuple<Cs...>>;
  template <device C>
  static constexpr std::size_t kind_of = [] {
    std::size_t k = 0, found = kinds;
    ((std::is_same_v<C, Cs> ? (found = k, ++k) : ++k), ...);
    return found;
  }();

  /// The part of construction that does not depend on the optimiser's type (erased by then):
  /// one instantiation per model and kinds of device.
  template <class M>
  replica_set(std::unique_ptr<Comm> comm, const std::vector<device_id>& devices, const M& model,
              detail::erased_optimizer<Cs...>&& opt)
      : comm_(std::move(comm)), devices_(devices), info_(std::move(opt.info)), steppers_(std::move(opt.steppers)) {
    auto shared = std::make_shared<const M>(model);
    if constexpr (requires { shared->loss_scaler(); }) scaler_ = shared->loss_scaler();  // float16's, the copy's own
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      const device_id d = devices_[i];
      const device_scope scope(d);
      const bool made = [&]<std::size_t... K>(std::index_sequence<K...>) {
        return (add_slot<kind_at<K>, M>(i, d, shared) || ...);
      }(std::make_index_sequence<kinds>{});
      if (!made) detail::throw_kind_not_in_set(d, ((std::string(" ") + (is_gpu_v<Cs> ? "any_gpu" : "cpu")) + ...));
    }
    size_ = home([](const auto& r) { return r.model().size(); });
    each([&](auto& r) {
      r.model().set_index(first_replica() + r.index());
      r.buffer_ = detail::zeros<typename std::remove_cvref_t<decltype(r)>::device_type>(size_ + extra);
      r.state_ = detail::zeros<typename std::remove_cvref_t<decltype(r)>::device_type>(state_size());
    });
    // Across ranks every replica starts from rank 0's parameters: the models must be the same
    // size everywhere (one rank's larger model would fail MPI_Bcast on that rank alone, the others
    // waiting), so the sizes are compared first and every rank refuses a mismatch.
    if constexpr (Comm::spans_processes) {
      std::vector<std::uint64_t> size{size_};
      dist::broadcast_values(*comm_, size);
      dist::agree(*comm_, [&] {
        if (size[0] != size_)
          throw config_error("locus: data_parallel: this rank's model has " + std::to_string(size_) +
                             " parameters, rank 0's " + std::to_string(size[0]) + ": every rank must build the same model");
      });
    }
    auto p = parameters();
    comm_->broadcast_host(p.data(), p.size());
    set_parameters(p);
  }

  /// Makes replica i on d when d is of kind C (true), else nothing (false).
  template <device C, class M>
  bool add_slot(std::size_t i, device_id d, const std::shared_ptr<const M>& model) {
    if ((d.kind == device_kind::gpu) != (C::kind == device_kind::gpu)) return false;
    auto slot = std::make_unique<replica_slot<C>>();
    slot->index_ = i;
    slot->device_ = d;
    slot->model_ = detail::make_replica<M, C>(model);
    slot->stepper_ = &std::get<kind_of<C>>(steppers_);
    auto& mine = std::get<kind_of<C>>(slots_);
    where_.emplace_back(kind_of<C>, mine.size());
    mine.push_back(std::move(slot));
    return true;
  }

  /// f(slot i) without a device_scope (for references to it).
  template <class Self, class F>
  static decltype(auto) slot_visit(Self& self, std::size_t i, F&& f) {
    const auto [kind, pos] = self.where_[i];
    if constexpr (kinds == 1) {
      (void)kind;
      return f(*std::get<0>(self.slots_)[pos]);
    } else {
      if (kind == 0) return f(*std::get<0>(self.slots_)[pos]);
      return f(*std::get<1>(self.slots_)[pos]);
    }
  }
  /// f(slot i) inside a device_scope of its device.
  template <class Self, class F>
  static decltype(auto) visit(Self& self, std::size_t i, F&& f) {
    if (i >= self.devices_.size()) detail::throw_no_replica(i, self.devices_.size());
    const device_scope scope(self.devices_[i]);
    return slot_visit(self, i, f);
  }

  std::unique_ptr<Comm> comm_;  // first: an MPI communicator is duplicated before anything uses it
  std::vector<device_id> devices_;
  optimizer_info info_;
  std::shared_ptr<detail::loss_scaler> scaler_;
  std::tuple<detail::step_function<Cs>...> steppers_;
  std::size_t size_ = 0;
  std::tuple<std::vector<std::unique_ptr<replica_slot<Cs>>>...> slots_;
  std::vector<std::pair<std::size_t, std::size_t>> where_;  // replica i: its kind, its place among that kind's
  std::unique_ptr<detail::replica_threads> threads_;      // made on the first concurrent step
};

/// The replica set data_parallel<P, Ds...> uses: the typed group of P's communicator kind over
/// Ds..., erased (dist::group_adapter), and the kinds of device among Ds...
template <class Kind, device... Ds>
using replica_set_for = typename detail::set_of_kinds<
    dist::any_group<Kind::template group<Ds...>::spans_processes, dist::one_sided<typename Kind::template group<Ds...>>>,
    (std::is_same_v<Ds, cpu> || ...), (is_gpu_v<Ds> || ...)>::type;

namespace detail {
/// The communicator group of kind Kind over Ds..., its type erased (the one piece of a replica set
/// made per device list).
template <class Kind, device... Ds>
LOCUS_NOINLINE auto make_group() {
  using group = typename Kind::template group<Ds...>;
  using erased = dist::any_group<group::spans_processes, dist::one_sided<group>>;
  return std::unique_ptr<erased>(std::make_unique<dist::group_adapter<group, Ds...>>());
}
/// A replica set of `model` on `devices`, over `comm`: one copy per set type, model and optimiser,
/// whatever the devices.
template <class Set, class M, optimizer O>
LOCUS_NOINLINE std::unique_ptr<Set> make_set(std::unique_ptr<typename Set::communicator_type> comm,
                                             const std::vector<device_id>& devices, const M& model, const O& opt) {
  return std::make_unique<Set>(std::move(comm), devices, model, opt);
}
/// The replica set of kind Kind over Ds..., made with its communicator.
template <class Kind, device... Ds, class M, optimizer O>
std::unique_ptr<replica_set_for<Kind, Ds...>> make_replica_set(const M& model, const O& opt) {
  return make_set<replica_set_for<Kind, Ds...>>(make_group<Kind, Ds...>(), {device_id(id_of<Ds>)...}, model, opt);
}
}  // namespace detail

}  // namespace locus::train
