#pragma once
// The replicas of one model on the devices Ds... of a process, with what a policy works on: each
// replica's parameters and gradient (model.hpp), a flat buffer per replica (the gradient, or the
// parameters, plus two slots: the loss and a failure flag travel with them through one all-reduce),
// each replica's optimiser state and step count, the optimiser (its type erased: data_parallel's
// type names the policy and the devices only), and the communicator group of the policy's kind.
// Policies see the trainer only through this class (and fit_context, policy.hpp).
#include <locus/config.hpp>
#include <locus/backend/parallel.hpp>
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
#include <locus/train/model.hpp>
#include <locus/train/optimizer.hpp>
#include <locus/train/runner.hpp>

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

namespace detail {
/// An optimiser's step on one device, its type erased (one per replica).
template <device D>
using step_function = std::function<void(float lr, std::uint64_t step, const std::vector<tensor_view<float, D, 1>>&,
                                         const std::vector<tensor_view<const float, D, 1>>&,
                                         const tensor_view<float, D, 1>&, float scale)>;
/// The views as views of device type C (the same device: below the typed surface).
template <device C, class T, device D>
std::vector<tensor_view<T, C, 1>> retag_all(const std::vector<tensor_view<T, D, 1>>& v) {
  std::vector<tensor_view<T, C, 1>> out;
  out.reserve(v.size());
  for (const auto& x : v) out.push_back(locus::detail::retag<C>(x));
  return out;
}
/// The optimiser's step on D: its kernels compiled for core_device_t<D> (one copy per optimiser and
/// kind of device), run inside a device_scope of D.
template <device D, optimizer O>
step_function<D> step_function_of(const O& opt) {
  return [opt](float lr, std::uint64_t step, const std::vector<tensor_view<float, D, 1>>& p,
               const std::vector<tensor_view<const float, D, 1>>& g, const tensor_view<float, D, 1>& s,
               float scale) {
    using C = core_device_t<D>;
    const device_scope scope(id_of<D>);
    apply_step<O, C>(opt, lr, step, retag_all<C>(p), retag_all<C>(g), locus::detail::retag<C>(s), scale);
  };
}

/// An optimiser, validated, as replica_set keeps it: what policies may know of it and its step on
/// each device. Made by erase_optimizer, the only part of a replica_set's construction that
/// depends on the optimiser's type.
template <device... Ds>
struct erased_optimizer {
  optimizer_info info;
  std::tuple<step_function<Ds>...> steppers;
};
template <device... Ds, optimizer O>
erased_optimizer<Ds...> erase_optimizer(const O& opt) {
  opt.validate();
  erased_optimizer<Ds...> e;
  e.info.name = O::name;
  e.info.lr = opt.lr;
  e.info.state_buffers = opt.state_buffers();
  if constexpr (std::is_same_v<O, sgd>) e.info.sgd_options = opt;
  if (e.info.state_buffers > max_state_buffers)
    throw config_error("locus: " + e.info.name + ": " + std::to_string(e.info.state_buffers) +
                       " state buffers per parameter, at most " + std::to_string(max_state_buffers));
  e.steppers = std::tuple<step_function<Ds>...>{step_function_of<Ds>(opt)...};
  return e;
}

// Pieces of replica_set that depend on one device alone, kept out of line: every device list and
// communicator kind calls the same copy instead of inlining its own.

/// A replica of `model` on D.
template <class M, device D>
LOCUS_NOINLINE std::unique_ptr<replica<D>> make_replica(const std::shared_ptr<const M>& model) {
  return std::make_unique<replica_of<M, D>>(model);
}
/// n zeros on D.
template <device D>
LOCUS_NOINLINE tensor<float, D, 1> zeros(std::size_t n) {
  return tensor<float, D, 1>(shape{n}, 0.f);
}
/// The replica's parameters := the flat host values p.
template <device D>
LOCUS_NOINLINE void set_replica_parameters(const std::vector<float>& p, replica<D>& r) {
  from_host(p, r.parameters());
}

/// True when every element of the views is finite (replica_set::all_finite, a function of the
/// device alone).
template <device D, class Views>
[[nodiscard]] bool all_finite(const Views& views) {
  for (const auto& v : views)
    if (v.size() != 0 && !std::isfinite(double(on<D>(max(abs(v))).item()))) return false;
  return true;
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

/// Writes the host floats `values` into t from element k on (a function of the device alone).
template <device D>
void set_slots(tensor<float, D, 1>& t, std::size_t k, std::initializer_list<float> values) {
  locus::transfer(tensor_view<float, D, 1>(t.data() + k, shape{values.size()}),
                  tensor_view<const float, cpu, 1>(values.begin(), shape{values.size()}));
}
}  // namespace detail

template <class Kind, class... Ds>
class replica_set {
public:
  /// Replica I's device.
  template <std::size_t I>
  using device_at = std::tuple_element_t<I, std::tuple<Ds...>>;

  using communicator_type = typename Kind::template group<Ds...>;
  static_assert(dist::communicator<communicator_type, Ds...>,
                "locus: the policy's communicator kind does not meet locus::dist::communicator "
                "(see locus/dist/communicator.hpp)");
  static constexpr std::size_t device_count = sizeof...(Ds);
  using home_device = device_at<0>;
  /// Replicas run on threads of their own only when none of them shares the host's cores.
  static constexpr bool concurrent = (!backend::runs_on_host<Ds> && ...);
  /// Slots after the parameters in each flat buffer: [n] the loss, [n + 1] a failure flag.
  static constexpr std::size_t extra = 2;

  /// One replica of `model` per device, all starting from the first device's initial parameters
  /// (rank 0's across processes).
  template <class M, optimizer O>
  replica_set(const M& model, const O& opt) : replica_set(model, detail::erase_optimizer<Ds...>(opt)) {}

  [[nodiscard]] communicator_type& comm() noexcept { return comm_; }
  [[nodiscard]] const communicator_type& comm() const noexcept { return comm_; }
  /// The optimiser's name, base rate, state size and (for sgd) options.
  [[nodiscard]] const optimizer_info& optimizer() const noexcept { return info_; }
  /// The number of parameters, all tensors together.
  [[nodiscard]] std::size_t parameter_count() const noexcept { return size_; }
  /// Replicas over all processes, and the global index of this process's first.
  [[nodiscard]] std::size_t replica_count() const noexcept { return std::size_t(comm_.size()) * device_count; }
  [[nodiscard]] std::size_t first_replica() const noexcept { return std::size_t(comm_.rank()) * device_count; }

  template <std::size_t I>
  [[nodiscard]] train::replica<device_at<I>>& replica() noexcept { return *std::get<I>(replicas_); }
  template <std::size_t I>
  [[nodiscard]] const train::replica<device_at<I>>& replica() const noexcept { return *std::get<I>(replicas_); }
  /// Replica I's flat buffer: parameter_count() + extra floats.
  template <std::size_t I>
  [[nodiscard]] tensor<float, device_at<I>, 1>& buffer() noexcept { return std::get<I>(buffers_); }
  /// Replica I's optimiser state, flat: state_buffers x parameter_count() floats, buffer after
  /// buffer (sgd: the momentum; Adam: the first moments, then the second).
  template <std::size_t I>
  [[nodiscard]] tensor<float, device_at<I>, 1>& state() noexcept { return std::get<I>(state_); }
  template <std::size_t I>
  [[nodiscard]] const tensor<float, device_at<I>, 1>& state() const noexcept { return std::get<I>(state_); }
  /// The floats of each replica's state.
  [[nodiscard]] std::size_t state_size() const noexcept { return info_.state_buffers * size_; }
  /// The optimiser steps replica I has taken.
  template <std::size_t I>
  [[nodiscard]] std::uint64_t optimizer_steps() const noexcept { return steps_[I]; }

  /// One optimiser step of replica I: its parameters from `grads` (views on its device, shaped
  /// like the parameters, scaled by `scale`) at the scheduled rate `lr`, with its state and step
  /// count; one kernel per tensor. Call it from replica I's part of run() (or each()) only.
  template <std::size_t I>
  void step(float lr, const std::vector<tensor_view<const float, device_at<I>, 1>>& grads, float scale = 1.f) {
    std::get<I>(steppers_)(lr, steps_[I] + 1, replica<I>().parameters(), grads, std::get<I>(state_).view(), scale);
    ++steps_[I];  // after: a step that throws is not counted
  }

  /// Every replica's flat buffer (whole, or the first `n` floats), for the communicator.
  [[nodiscard]] dist::buffers<Ds...> buffers(std::size_t n) {
    return std::apply([n](auto&... b) { return dist::buffers<Ds...>{view_of(b, n)...}; }, buffers_);
  }
  /// Every replica's optimiser state, for the communicator (local_sgd averages it).
  [[nodiscard]] dist::buffers<Ds...> states() {
    return std::apply([this](auto&... v) { return dist::buffers<Ds...>{view_of(v, state_size())...}; }, state_);
  }

  /// Runs f(std::integral_constant<std::size_t, I>{}) for every replica I: on threads that stay
  /// when the replicas are GPUs, one after the other when they share the host's cores. Waits for
  /// all and rethrows the first failure.
  template <class F>
  void run(F&& f) {
    std::vector<std::function<void()>> work;
    detail::for_each_index(std::index_sequence_for<Ds...>{}, [&](auto i) { work.push_back([&f, i] { f(i); }); });
    if constexpr (concurrent && device_count > 1) {
      if (!threads_) threads_ = std::make_unique<detail::replica_threads>();
      threads_->run(work);
    } else {
      detail::run_parallel(work, false);
    }
  }
  /// f(std::integral_constant<std::size_t, I>{}) for every replica, in turn, on this thread.
  template <class F>
  void each(F&& f) {
    detail::for_each_index(std::index_sequence_for<Ds...>{}, f);
  }

  /// Replica 0's parameters, flat, on the host.
  [[nodiscard]] std::vector<float> parameters() const { return to_host(replica<0>().parameters()); }
  /// Every replica takes the flat parameters p.
  void set_parameters(const std::vector<float>& p) {
    each([&](auto i) { detail::set_replica_parameters(p, replica<i>()); });
  }
  /// Every replica's optimiser state, on the host.
  [[nodiscard]] std::vector<std::vector<float>> states_host() const {
    std::vector<std::vector<float>> out;
    detail::for_each_index(std::index_sequence_for<Ds...>{},
                           [&](auto i) { out.push_back(std::get<i>(state_).view().to_vector()); });
    return out;
  }
  /// Every replica's optimiser step count.
  [[nodiscard]] std::vector<std::uint64_t> optimizer_steps() const { return {steps_.begin(), steps_.end()}; }
  /// Every replica's random-stream position (replica::draws()).
  [[nodiscard]] std::vector<std::uint64_t> draws() const {
    std::vector<std::uint64_t> out;
    detail::for_each_index(std::index_sequence_for<Ds...>{}, [&](auto i) { out.push_back(replica<i>().draws()); });
    return out;
  }
  /// Every replica's stream position from `draws` (one per replica), or 0 when it is empty.
  void set_draws(const std::vector<std::uint64_t>& draws) {
    each([&](auto i) { replica<i>().set_draws(draws.empty() ? 0 : draws[i]); });
  }
  /// Every replica's state and step count from `states` and `steps` (one each per replica, each
  /// state of state_size() floats), or zero when both are empty. The caller has checked the sizes.
  void set_states(const std::vector<std::vector<float>>& states, const std::vector<std::uint64_t>& steps) {
    each([&](auto i) {
      auto& mine = std::get<i>(state_);
      if (states.empty()) {
        if (state_size() != 0) mine = mine * 0.f;
      } else if (state_size() != 0) {
        from_host(states[i], std::vector{mine.view()});
      }
      steps_[i] = steps.empty() ? 0 : steps[i];
    });
  }

  /// True when every element of the views is finite (one reduction each, on their device): the
  /// largest magnitude, which is NaN when any element is (max lets NaN win) and never overflows
  /// (a sum would: 32 elements of 2e38 are finite, their float sum is not).
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
    float v = 0;
    locus::transfer(tensor_view<float, cpu, 1>(&v, shape{1}), tensor_view<const float, D, 1>(t.data() + k, shape{1}));
    return v;
  }
  /// Writes the host floats `values` into t from element k on.
  template <device D>
  static void set_slots(tensor<float, D, 1>& t, std::size_t k, std::initializer_list<float> values) {
    detail::set_slots(t, k, values);
  }

private:
  /// The part of construction that does not depend on the optimiser's type (erased by then):
  /// one instantiation per model and device list, not per optimiser as well.
  template <class M>
  replica_set(const M& model, detail::erased_optimizer<Ds...>&& opt)
      : info_(std::move(opt.info)), steppers_(std::move(opt.steppers)) {
    auto shared = std::make_shared<const M>(model);
    replicas_ = std::tuple<std::unique_ptr<train::replica<Ds>>...>{detail::make_replica<M, Ds>(shared)...};
    size_ = replica<0>().size();
    each([&](auto i) { replica<i>().set_index(first_replica() + i); });
    buffers_ = std::tuple<tensor<float, Ds, 1>...>{detail::zeros<Ds>(size_ + extra)...};
    state_ = std::tuple<tensor<float, Ds, 1>...>{detail::zeros<Ds>(state_size())...};
    // Across ranks every replica starts from rank 0's parameters: the models must be the same
    // size everywhere (one rank's larger model would fail MPI_Bcast on that rank alone, the others
    // waiting), so the sizes are compared first and every rank refuses a mismatch.
    if constexpr (communicator_type::spans_processes) {
      std::vector<std::uint64_t> size{size_};
      dist::broadcast_values(comm_, size);
      dist::agree(comm_, [&] {
        if (size[0] != size_)
          throw config_error("locus: data_parallel: this rank's model has " + std::to_string(size_) +
                             " parameters, rank 0's " + std::to_string(size[0]) + ": every rank must build the same model");
      });
    }
    auto p = parameters();
    comm_.broadcast_host(p.data(), p.size());
    set_parameters(p);
  }

  template <device D>
  static tensor_view<float, D, 1> view_of(tensor<float, D, 1>& t, std::size_t n) {
    return tensor_view<float, D, 1>(t.data(), shape{n});
  }

  communicator_type comm_;  // first: an MPI communicator is duplicated before anything uses it
  optimizer_info info_;
  std::tuple<detail::step_function<Ds>...> steppers_;
  std::size_t size_ = 0;
  std::tuple<std::unique_ptr<train::replica<Ds>>...> replicas_;
  std::tuple<tensor<float, Ds, 1>...> buffers_;
  std::tuple<tensor<float, Ds, 1>...> state_;
  std::array<std::uint64_t, sizeof...(Ds)> steps_{};
  std::unique_ptr<detail::replica_threads> threads_;  // made on the first concurrent step
};

}  // namespace locus::train
