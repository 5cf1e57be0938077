#pragma once
// What the training policies train: the model concept, and a model's replica on one device behind
// a small virtual interface (so data_parallel<Policy, Devices...> names devices, not the model).
//
// A model M (bring your own; softmax_regression.hpp is a complete small one):
//   typename M::value_type            float: the policies train float models
//   typename M::template params<D>    its parameters on device D, any type with
//       p.for_each(f)                 f(view) for every parameter tensor, always in the same order:
//                                     tensor_view<float, D, R> from a mutable p, tensor_view<const
//                                     float, D, R> from a const one
//   m.template init<D>()              -> params<D> from the model's initialiser
//   m.loss_and_grad(p, x, y)          -> s with s.loss (tensor<float, D, 0>: the batch's mean loss)
//                                     and s.grad (params<D>: the gradient of s.loss)
//   m.predict(p, x)                   -> tensor<std::int64_t, D>: the class of each row (a classifier)
// where x is a tensor<float, D, 2> (a batch, one example per row) and y a tensor<std::int32_t, D>
// (their labels), or, for a model that declares `using target_type = float;` (regression), a
// tensor<float, D, 2> of float targets [rows, k] (such a model needs no predict). Optional:
//   m.loss(p, x, y)                   -> tensor<float, D, 0>: the mean loss in evaluation mode (no
//                                     dropout), for data_parallel::mean_loss and the validation of
//                                     fit; without it the loss of loss_and_grad(p, x, y) is used,
//                                     for models whose loss_and_grad takes no random stream. The policies see the parameters as one flat vector, the concatenation of the
// tensors in for_each order: that is what is averaged, updated, copied between devices and saved.
#include <locus/backend/registry.hpp>
#include <locus/config.hpp>
#include <locus/data/sampler.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/tensor/transfer.hpp>
#include <locus/train/layout.hpp>

#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace locus::train {

namespace detail {
/// Stands for the callable a policy passes to for_each (any view).
struct any_view_sink {
  template <class V>
  void operator()(const V&) const {}
};

template <class T>
inline constexpr bool model_false = false;

/// What for_each must hand its callable: a view of D's floats, tensor_view<float, D, R> from a
/// mutable params<D> (the policies write through it), either constness from a const one.
template <class V, class D, bool Const>
inline constexpr bool is_parameter_view = false;
template <class D, int R, bool Const>
inline constexpr bool is_parameter_view<tensor_view<float, D, R>, D, Const> = true;
template <class D, int R>
inline constexpr bool is_parameter_view<tensor_view<const float, D, R>, D, true> = true;

/// The one static_assert that says what for_each handed over instead of a parameter view (called
/// where it did; a function template per type, so that the mutable and the const for_each, the
/// trainer's check and the replica's use, all report it once).
template <class Tag>
void explain_tensor_not_view() {  // one specialization: one line, whatever the ranks and devices
  static_assert(model_false<Tag>, "locus: params<D>::for_each must pass tensor views: f(W1.view()), not f(W1)");
}
template <class V, class D>
void explain_not_a_parameter_view() {
  if constexpr (locus::detail::is_tensor<V>::value) {
    explain_tensor_not_view<void>();
  } else if constexpr (!locus::detail::is_tensor_view<V>::value) {
    static_assert(model_false<V>,
                  "locus: params<D>::for_each must pass tensor views of the parameter tensors (f(W1.view())), not "
                  "other values");
  } else if constexpr (!std::is_same_v<typename V::value_type, float>) {
    static_assert(model_false<V>, "locus: params<D>::for_each passes a view of non-float elements: parameters are "
                                  "float tensors");
  } else if constexpr (!std::is_same_v<typename V::device_type, D>) {
    static_assert(model_false<V>, "locus: params<D>::for_each passes a view of a tensor on another device: params<D> "
                                  "holds its tensors on D");
  } else {
    static_assert(model_false<V>, "locus: params<D>::for_each on a mutable params<D> must pass mutable views "
                                  "(tensor_view<float, D, R>): f(W1.view()), not f(std::as_const(W1).view())");
  }
}
template <class V, class D, bool Const>
void explain_parameter_view() {
  explain_not_a_parameter_view<V, D>();
}

/// The callable the checks hand to for_each: takes parameter views of D, explains anything else.
template <class D, bool Const>
struct parameter_view_sink {
  template <class V>
  void operator()(const V&) const {
    if constexpr (!is_parameter_view<V, D, Const>) explain_parameter_view<V, D, Const>();
  }
};

/// Runs the model's for_each (mutable and const) over the sinks above: instantiated, never called,
/// so that what for_each passes is checked where the trainer is built.
template <class P, class D>
void probe_for_each(P& p) {
  p.for_each(parameter_view_sink<D, false>{});
  std::as_const(p).for_each(parameter_view_sink<D, true>{});
}
}  // namespace detail

/// M is trained on float targets (regression): it declares `using target_type = float;`. Other
/// models are classifiers, trained on int32 labels.
template <class M>
concept trains_on_values = requires { typename M::target_type; } && std::same_as<typename M::target_type, float>;

/// What M's loss_and_grad takes as y on device D: tensor<float, D, 2> (float targets [rows, k])
/// for a model trained on them, tensor<std::int32_t, D> (labels) for a classifier.
template <class M, class D>
using targets_of = std::conditional_t<trains_on_values<M>, tensor<float, D, 2>, tensor<std::int32_t, D>>;

/// A model's parameters on one device: for_each visits every tensor, mutably or not.
template <class P>
concept parameter_set = requires(P& p, const P& cp, detail::any_view_sink f) {
  p.for_each(f);
  cp.for_each(f);
};

/// M can be trained on device D by the policies of data_parallel (see the list at the top). A
/// concept sees declarations only: what for_each passes in its body is checked when data_parallel
/// is built (detail::check_model, one `locus:` message per requirement).
template <class M, class D>
concept model_on =
    device<D> && std::same_as<typename M::value_type, float> && parameter_set<typename M::template params<D>> &&
    requires(const M& m, const typename M::template params<D>& p, const tensor<float, D, 2>& x,
             const targets_of<M, D>& y) {
      { m.template init<D>() } -> std::same_as<typename M::template params<D>>;
      requires std::same_as<std::remove_cvref_t<decltype(m.loss_and_grad(p, x, y).loss)>, tensor<float, D, 0>>;
      requires std::same_as<std::remove_cvref_t<decltype(m.loss_and_grad(p, x, y).grad)>,
                            typename M::template params<D>>;
      requires trains_on_values<M> || requires {
        { m.predict(p, x) } -> std::same_as<tensor<std::int64_t, D>>;
      };
    };

namespace detail {
/// M's loss can be evaluated without training (mean_loss, fit's validation): it has loss(p, x,
/// y), or a loss_and_grad that takes no random stream (its loss is the same value).
template <class M, class D>
concept evaluates =
    requires(const M& m, const typename M::template params<D>& p, const tensor<float, D, 2>& x,
             const targets_of<M, D>& y) { m.loss(p, x, y); } ||
    (!requires(const M& m, const typename M::template params<D>& p, const tensor<float, D, 2>& x,
               const targets_of<M, D>& y) { m.loss_and_grad(p, x, y, std::uint64_t{}); });

/// The refusal of a model that cannot be evaluated (not `evaluates`: see model_core::loss), by
/// `what` (mean_loss, fit's validation).
LOCUS_RUNTIME_INLINE void check_evaluates(const char* what, bool evaluates);

template <class M>
concept unknown_target_type = requires { typename M::target_type; } &&
                              !std::same_as<typename M::target_type, float> &&
                              !std::same_as<typename M::target_type, std::int32_t>;

/// One static_assert per requirement of model_on<M, D>, the first one M misses; then what for_each
/// passes (probe_for_each). True when M meets them all.
template <class M, class D>
constexpr bool check_model() {
  using X = tensor<float, D, 2>;
  using Y = targets_of<M, D>;
  if constexpr (unknown_target_type<M>) {
    static_assert(model_false<M>, "locus: model: M::target_type must be float (a model trained on float targets) "
                                  "or std::int32_t (a classifier, the default)");
    return false;
  } else if constexpr (!requires { typename M::value_type; }) {
    static_assert(model_false<M>, "locus: model: M::value_type is missing; it must be float");
    return false;
  } else if constexpr (!std::same_as<typename M::value_type, float>) {
    static_assert(model_false<M>, "locus: model: M::value_type must be float (the policies train float models)");
    return false;
  } else if constexpr (!requires { typename M::template params<D>; }) {
    static_assert(model_false<M>, "locus: model: M::params<D> is missing: the parameters on device D, a member "
                                  "template `template <locus::device D> struct params`");
    return false;
  } else {
    using P = typename M::template params<D>;
    if constexpr (!parameter_set<P>) {
      static_assert(model_false<M>, "locus: model: params<D> needs for_each(f), callable on a mutable and on a const "
                                    "params<D>, calling f(view) for every parameter tensor");
      return false;
    } else if constexpr (!requires(const M& m) { m.template init<D>(); }) {
      static_assert(model_false<M>, "locus: model: m.init<D>() is missing (a const member template returning "
                                    "params<D>)");
      return false;
    } else if constexpr (!std::same_as<decltype(std::declval<const M&>().template init<D>()), P>) {
      static_assert(model_false<M>, "locus: model: m.init<D>() must return params<D> (by value)");
      return false;
    } else if constexpr (!requires(const M& m, const P& p, const X& x, const Y& y) { m.loss_and_grad(p, x, y); }) {
      if constexpr (trains_on_values<M>)
        static_assert(model_false<M>, "locus: model: m.loss_and_grad(p, x, y) must be callable (const) with a const "
                                      "params<D>&, x a tensor<float, D, 2> and y a tensor<float, D, 2> (the float "
                                      "targets: M::target_type is float)");
      else
        static_assert(model_false<M>, "locus: model: m.loss_and_grad(p, x, y) must be callable (const) with a const "
                                      "params<D>&, x a tensor<float, D, 2> and y a tensor<std::int32_t, D> (labels; "
                                      "a model trained on float targets declares `using target_type = float;`)");
      return false;
    } else {
      using S = decltype(std::declval<const M&>().loss_and_grad(std::declval<const P&>(), std::declval<const X&>(),
                                                                std::declval<const Y&>()));
      if constexpr (!requires(S s) { s.loss; } ||
                    !std::same_as<std::remove_cvref_t<decltype(std::declval<S>().loss)>, tensor<float, D, 0>>) {
        static_assert(model_false<M>, "locus: model: loss_and_grad(p, x, y).loss must be a tensor<float, D, 0> (rank "
                                      "0: the batch's mean loss)");
        return false;
      } else if constexpr (!requires(S s) { s.grad; } ||
                           !std::same_as<std::remove_cvref_t<decltype(std::declval<S>().grad)>, P>) {
        static_assert(model_false<M>, "locus: model: loss_and_grad(p, x, y).grad must be a params<D> (the gradient, "
                                      "the same type as the parameters)");
        return false;
      } else if constexpr (trains_on_values<M>) {
        (void)&probe_for_each<P, D>;
        return model_on<M, D>;
      } else if constexpr (!requires(const M& m, const P& p, const X& x) { m.predict(p, x); }) {
        static_assert(model_false<M>, "locus: model: m.predict(p, x) must be callable (const) with a const "
                                      "params<D>& and x a tensor<float, D, 2>");
        return false;
      } else if constexpr (!std::same_as<decltype(std::declval<const M&>().predict(std::declval<const P&>(),
                                                                                    std::declval<const X&>())),
                                         tensor<std::int64_t, D>>) {
        static_assert(model_false<M>, "locus: model: m.predict(p, x) must return tensor<std::int64_t, D> (the class "
                                      "of each row)");
        return false;
      } else {
        (void)&probe_for_each<P, D>;  // instantiates for_each: its callable's checks speak
        return model_on<M, D>;
      }
    }
  }
}
}  // namespace detail

/// A model's parameters on device D, seen by the policies: rank-1 views of every parameter tensor
/// (stable for the replica's lifetime), and the loss-and-gradient step, whose gradient tensors are
/// kept (views in the same order) until the next step.
template <device D>
class replica {
public:
  using device_type = D;
  virtual ~replica() = default;
  replica() = default;
  replica(const replica&) = delete;
  replica& operator=(const replica&) = delete;

  [[nodiscard]] const std::vector<tensor_view<float, D, 1>>& parameters() const noexcept { return views_; }
  /// The extents of every parameter tensor (the views above are flat).
  [[nodiscard]] const std::vector<std::vector<std::uint64_t>>& shapes() const noexcept { return shapes_; }
  /// The number of parameters (all tensors together).
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// The mean loss on (x, y), y the rows' labels or float targets (whichever the model trains on);
  /// its gradient is kept, see gradients().
  virtual double loss_and_grad(const tensor<float, D, 2>& x, const data::targets<D>& y) = 0;
  /// loss_and_grad without reading the loss: it is written into `loss` (an element on D) on the
  /// device. No host wait (host_waits): the caller reads it later, once.
  virtual void loss_and_grad_into(const tensor<float, D, 2>& x, const data::targets<D>& y,
                                  const tensor_view<float, D, 0>& loss) = 0;
  /// The mean loss on (x, y) in evaluation mode (no dropout; nothing kept, no random stream drawn).
  [[nodiscard]] virtual double loss(const tensor<float, D, 2>& x, const data::targets<D>& y) const = 0;
  /// The gradient of the last loss_and_grad, one view per parameter tensor.
  [[nodiscard]] const std::vector<tensor_view<const float, D, 1>>& gradients() const noexcept { return grads_; }
  /// Copies the last gradient into one flat buffer of size() elements (what is averaged or sent).
  void pack_gradients(const tensor_view<float, D, 1>& flat) const {
    if (flat.size() != size_ || grads_.size() != views_.size())
      throw shape_error("locus: replica<" + id_of<D>.type_name() + ">: a gradient buffer of " +
                        std::to_string(flat.size()) + " elements for " + std::to_string(size_) +
                        " parameters, or no gradient yet");
    pack(grads_, flat);
  }
  /// The class of each row of x (a classifier; a model trained on float targets throws config_error).
  [[nodiscard]] virtual tensor<std::int64_t, D> predict(const tensor<float, D, 2>& x) const = 0;

  /// The loss_and_grad calls this replica has made: with its index among all replicas, the random
  /// stream of the next one (dropout's masks) when the model takes one (loss_and_grad(p, x, y,
  /// stream)). Checkpoints keep it, so a resumed run draws the masks the uninterrupted one would;
  /// each replica has its own, so the masks do not depend on the order replica threads run in.
  [[nodiscard]] std::uint64_t draws() const noexcept { return draws_; }
  void set_draws(std::uint64_t n) noexcept { draws_ = n; }
  /// This replica's index among all replicas of the job (replica_set sets it).
  void set_index(std::size_t i) noexcept { index_ = i; }

protected:
  /// The stream of the next call, and the call counted: replica i's calls are streams
  /// i * 2^40, i * 2^40 + 1, ...
  std::uint64_t next_stream() noexcept { return (std::uint64_t(index_) << 40) + draws_++; }

  std::vector<tensor_view<float, D, 1>> views_;
  std::vector<std::vector<std::uint64_t>> shapes_;
  std::vector<tensor_view<const float, D, 1>> grads_;
  std::size_t size_ = 0;
  std::uint64_t draws_ = 0;
  std::size_t index_ = 0;
};

namespace detail {
/// A parameter tensor as the policies see it below the typed surface: its elements, flat.
struct flat_tensor {
  float* data;
  std::size_t size;
  std::vector<std::uint64_t> extents;
};

/// A model's parameters and last gradient on C = core_device_t<D> (the cpu, or any_gpu for every
/// gpu<N>) and its code: one copy per model and kind of device, whatever the devices of the
/// trainers, every member out of line (replica_of<M, D> only opens D's device_scope and calls).
template <class M, device C>
class model_core {
public:
  using params_type = typename M::template params<C>;

  /// The model's initial parameters on C (inside the scope of their device).
  LOCUS_NOINLINE static model_core* make(std::shared_ptr<const M> m) { return new model_core(std::move(m)); }
  LOCUS_NOINLINE static void destroy(model_core* c) noexcept { delete c; }

  /// The parameter tensors, flat, in for_each order.
  [[nodiscard]] const std::vector<flat_tensor>& tensors() const noexcept { return tensors_; }

  /// The loss of (x, y) and its gradient (kept; its tensors, flat, into `flat`). With `loss_out`
  /// (an element on C) the loss is written there on the device and 0 returned: no read, no host
  /// wait.
  LOCUS_NOINLINE double gradient(const tensor<float, C, 2>& x, const data::targets<C>& y, std::uint64_t stream,
                                 std::vector<flat_tensor>& flat, float* loss_out = nullptr);

  /// The loss of (x, y) in evaluation mode.
  LOCUS_NOINLINE double loss(const tensor<float, C, 2>& x, const data::targets<C>& y) const;

  /// The class of each row of x.
  LOCUS_NOINLINE tensor<std::int64_t, C> predict(const tensor<float, C, 2>& x) const;

private:
  explicit model_core(std::shared_ptr<const M> m);
  /// y's labels or float targets, whichever M trains on (data_error when the batch lacks them).
  static const targets_of<M, C>& targets_for(const data::targets<C>& y);

  std::shared_ptr<const M> model_;
  std::optional<params_type> p_;
  std::optional<params_type> grad_;
  std::vector<flat_tensor> tensors_;
};

// Out of the class: not inline, so that a separate-runtime program's files compile calls into
// the run-time file's copy of a built-in model's (LOCUS_DETAIL_PREBUILT, config.hpp).
template <class M, device C>
model_core<M, C>::model_core(std::shared_ptr<const M> m) : model_(std::move(m)) {
  p_.emplace(model_->template init<C>());
  p_->for_each([&]<class V>(const V& v) {
    if constexpr (!is_parameter_view<V, C, false>) {
      explain_parameter_view<V, C, false>();  // the one message, not errors deep in here
    } else {
      std::vector<std::uint64_t> extents;
      for (std::size_t d = 0; d < std::size_t(v.shape().rank()); ++d) extents.push_back(v.shape()[d]);
      tensors_.push_back({v.data(), v.size(), std::move(extents)});
    }
  });
}

template <class M, device C>
const targets_of<M, C>& model_core<M, C>::targets_for(const data::targets<C>& y) {
  if constexpr (trains_on_values<M>) {
    if (y.values.size() == 0)
      throw data::data_error("locus: the model trains on float targets (M::target_type is float) and the batch has "
                             "none: make the data set with make_dataset(features, row_size, targets, target_size)");
    return y.values;
  } else {
    if (y.labels.size() == 0)
      throw data::data_error("locus: the model is a classifier (int32 labels) and the batch has no labels: a model "
                             "trained on float targets declares `using target_type = float;`");
    return y.labels;
  }
}

template <class M, device C>
double model_core<M, C>::gradient(const tensor<float, C, 2>& x, const data::targets<C>& targets, std::uint64_t stream,
                                  std::vector<flat_tensor>& flat, float* loss_out) {
  const auto& y = targets_for(targets);
  auto s = [&] {
    if constexpr (requires { model_->loss_and_grad(*p_, x, y, stream); })
      return model_->loss_and_grad(*p_, x, y, stream);
    else return model_->loss_and_grad(*p_, x, y);
  }();
  double loss = 0;
  if (loss_out == nullptr) {
    loss = double(s.loss.item());
  } else {
    tensor_view<float, C, 0>(loss_out, locus::shape<0>{}) = copy(s.loss);
  }
  grad_.emplace(std::move(s.grad));
  std::as_const(*grad_).for_each([&]<class G>(const G& g) {
    if constexpr (!is_parameter_view<G, C, true>) explain_parameter_view<G, C, true>();
    else flat.push_back({const_cast<float*>(g.data()), g.size(), {}});
  });
  return loss;
}

template <class M, device C>
double model_core<M, C>::loss(const tensor<float, C, 2>& x, const data::targets<C>& targets) const {
  const auto& y = targets_for(targets);
  if constexpr (requires { model_->loss(*p_, x, y); }) {
    return double(model_->loss(*p_, x, y).item());
  } else if constexpr (evaluates<M, C>) {
    return double(model_->loss_and_grad(*p_, x, y).loss.item());  // no random stream: the same value
  } else {
    check_evaluates("mean_loss", false);
    return 0;
  }
}

template <class M, device C>
tensor<std::int64_t, C> model_core<M, C>::predict(const tensor<float, C, 2>& x) const {
  if constexpr (trains_on_values<M>) {
    (void)x;
    throw config_error("locus: accuracy: the model trains on float targets (regression): accuracy counts classes; "
                       "use mean_loss(data)");
  } else {
    return model_->predict(*p_, x);
  }
}

/// The checks of a gradient's tensors against the parameters' sizes.
LOCUS_RUNTIME_INLINE void check_gradient_sizes(const std::vector<flat_tensor>& grad,
                                               const std::vector<std::size_t>& sizes);
#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE void check_evaluates(const char* what, bool evaluates) {
  if (!evaluates)
    throw config_error(std::string("locus: ") + what + ": the model's loss_and_grad takes a random stream (dropout) "
                       "and the model has no loss(p, x, y) for evaluation mode");
}

LOCUS_RUNTIME_INLINE void check_gradient_sizes(const std::vector<flat_tensor>& grad,
                                               const std::vector<std::size_t>& sizes) {
  for (std::size_t index = 0; index < grad.size(); ++index)
    if (index >= sizes.size() || grad[index].size != sizes[index])
      throw shape_error("locus: the model's gradient tensor " + std::to_string(index) + " has " +
                        std::to_string(grad[index].size) + " elements; its parameter has " +
                        (index < sizes.size() ? std::to_string(sizes[index]) : std::string("none")));
  if (grad.size() != sizes.size())
    throw shape_error("locus: the model's gradient has " + std::to_string(grad.size()) + " tensors for " +
                      std::to_string(sizes.size()) + " parameters");
}
#endif
}  // namespace detail

/// The replica of model M on device D. Below the typed surface the model's code runs for
/// C = core_device_t<D> (the cpu, or any_gpu for every gpu<N>) inside a device_scope of D: its
/// parameters, gradients and kernels are compiled once per kind of device, not once per GPU; the
/// views this replica hands to the policies are typed on D.
template <class M, device D>
  requires model_on<M, core_device_t<D>>
class replica_of final : public replica<D> {
  using C = core_device_t<D>;
  using core = detail::model_core<M, C>;

public:
  explicit replica_of(std::shared_ptr<const M> model) : core_(make(std::move(model))) {
    for (const auto& t : core_->tensors()) {
      this->views_.emplace_back(t.data, shape{t.size});
      this->shapes_.push_back(t.extents);
      this->size_ += t.size;
      sizes_.push_back(t.size);
    }
  }

  double loss_and_grad(const tensor<float, D, 2>& x, const data::targets<D>& y) override {
    return gradient(x, y, nullptr);
  }
  void loss_and_grad_into(const tensor<float, D, 2>& x, const data::targets<D>& y,
                          const tensor_view<float, D, 0>& loss) override {
    (void)gradient(x, y, loss.data());
  }

  [[nodiscard]] double loss(const tensor<float, D, 2>& x, const data::targets<D>& y) const override {
    const device_scope scope(id_of<D>);
    return core_->loss(locus::detail::borrow<C>(x), borrow(y));
  }

  [[nodiscard]] tensor<std::int64_t, D> predict(const tensor<float, D, 2>& x) const override {
    const device_scope scope(id_of<D>);
    return locus::detail::adopt<D>(core_->predict(locus::detail::borrow<C>(x)));
  }

private:
  double gradient(const tensor<float, D, 2>& x, const data::targets<D>& y, float* loss_out) {
    this->grads_.clear();
    const device_scope scope(id_of<D>);
    std::vector<detail::flat_tensor> flat;
    const double loss = core_->gradient(locus::detail::borrow<C>(x), borrow(y), this->next_stream(), flat, loss_out);
    detail::check_gradient_sizes(flat, sizes_);
    std::vector<tensor_view<const float, D, 1>> views;
    for (const auto& g : flat) views.emplace_back(g.data, shape{g.size});
    this->grads_ = std::move(views);
    return loss;
  }

  static data::targets<C> borrow(const data::targets<D>& y) {
    return {locus::detail::borrow<C>(y.labels), locus::detail::borrow<C>(y.values)};
  }

  static std::unique_ptr<core, void (*)(core*) noexcept> make(std::shared_ptr<const M> model) {
    const device_scope scope(id_of<D>);
    return {core::make(std::move(model)), &core::destroy};
  }

  std::unique_ptr<core, void (*)(core*) noexcept> core_;
  std::vector<std::size_t> sizes_;
};

}  // namespace locus::train

// LOCUS_DETAIL_PREBUILT_MODEL(M): built-in model M (for float) compiled once, in the run-time file,
// on the cpu and on any_gpu, in a separate-runtime program (config.hpp, LOCUS_DETAIL_PREBUILT);
// written inside namespace locus::train after M's definition.
#ifdef LOCUS_DETAIL_PREBUILT
#  if LOCUS_HAS_GPUS
#    define LOCUS_DETAIL_PREBUILT_MODEL(M)                       \
      LOCUS_DETAIL_PREBUILT class detail::model_core<M, cpu>; \
      LOCUS_DETAIL_PREBUILT class detail::model_core<M, any_gpu>;
#  else
#    define LOCUS_DETAIL_PREBUILT_MODEL(M) LOCUS_DETAIL_PREBUILT class detail::model_core<M, cpu>;
#  endif
#endif
