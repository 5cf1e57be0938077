#pragma once
// Reverse-mode differentiation of locus expressions: variables and the backward pass.
//
//   ad::var<T, D, R>     a value on device D that gradients flow to: a parameter (ad::parameter(t),
//                        a view of t, no copy) or the result of a differentiable step. A var is an
//                        expression operand like a tensor: `relu(x * W + b)` over vars is an
//                        ordinary locus expression, fused and placed as always.
//   ad::evaluate(e)      an expression of vars evaluated (one fused kernel) into a new var
//   ad::keep(e)          the same for an intermediate used twice (and, for plain tensors, the value)
//   ad::backward(loss)   fills the gradient of every parameter the rank-0 loss depends on
//
// Each differentiable step keeps what its backward needs and a function that turns the gradient
// of its result into gradients of its inputs. The backward pass runs them once each, newest first.
//
// An elementwise step's backward is one fused kernel per variable operand however many operators
// it has: the expression is re-run on dual numbers (ad/dual.hpp) with that operand seeded, and the
// product of the upstream gradient and the derivative is written directly (summed over the rows
// or columns the operand was broadcast along: a bias's gradient is one reduction kernel).
//
// Lifetimes: the backward pass runs after the function that built the graph has returned, so a
// step keeps alive every operand its backward reads: the arena block of a tensor or view operand
// is held by the step (backend::storage_hold: freed by its tensor, it is not handed out again until
// the step goes), and host memory that is not locus's is copied. `auto k = tensor<float, D>(shape{n},
// 2.f); return sum(w * k);` inside a loss function is therefore exact. Writing into an operand
// between the forward and the backward pass still changes what the backward reads (as PyTorch
// refuses at run time and locus does not detect): compute into new tensors instead.
//
// Placement: a var<T, D, R>'s gradient is a tensor<T, D, R>, on the var's own device; an
// expression that mixes devices is the same compile error as without ad.
#include <locus/ad/dual.hpp>
#include <locus/backend/memory.hpp>
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/expr/node.hpp>
#include <locus/expr/operators.hpp>
#include <locus/ops/reduce.hpp>
#include <locus/placement/on.hpp>
#include <locus/tensor/tensor.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

namespace locus::ad {

template <class T, device D, int R = 1>
class var;

namespace detail {

inline std::atomic<std::uint64_t> next_order{0};

/// One step of the computation, type-erased for the backward pass.
struct step_base {
  const std::uint64_t order = next_order.fetch_add(1, std::memory_order_relaxed);
  bool requires_grad = false;  ///< a parameter, or a step that depends on one
  bool is_parameter = false;
  /// Its backward can run once and has (softmax_cross_entropy's, whose kept gradient was handed
  /// on): backward() refuses a graph that reaches it before any gradient changes.
  const char* spent = nullptr;
  std::vector<std::shared_ptr<step_base>> inputs;  ///< the steps whose values this one read
  /// The arena blocks of the constant operands its backward reads (see "Lifetimes" above), and
  /// copies of those that are not in an arena.
  std::vector<backend::storage_hold> holds;
  std::vector<std::shared_ptr<const void>> copies;
  step_base() = default;
  step_base(const step_base&) = delete;
  step_base& operator=(const step_base&) = delete;
  virtual ~step_base() = default;
  /// Turns this step's gradient into its inputs' (nothing when it has no gradient or no inputs).
  virtual void run_backward() = 0;
  /// Frees the gradient (an intermediate's, once it has been passed on).
  virtual void drop_gradient() noexcept = 0;
};

template <class T, device D, int R>
struct step final : step_base {
  tensor<T, D, R> owned;              ///< the value, unless it is a parameter's (then a view of it)
  tensor_view<const T, D, R> value;
  tensor<T, D, R> grad;
  /// A 16-bit value's gradient summed from two or more contributions: kept in float and rounded
  /// once, when it is read (settle), not once per contribution (a weight read by 512 steps of a
  /// bfloat16 graph would otherwise stop at 256).
  tensor<compute_t<T>, D, R> wide;
  bool has_grad = false;
  bool grad_is_one = false;           ///< the seed of the backward pass: d loss / d loss
  bool seed_pending = false;          ///< grad_is_one, and the 1 not written yet (a step that reads
                                      ///< grad_is_one never writes it: softmax_cross_entropy)
  std::function<void(step&)> back;    ///< empty for parameters and constants

  /// The gradient of this step's value, the seed written out first if it is still pending.
  tensor_view<const T, D, R> upstream() {
    write_seed();
    settle();
    return std::as_const(grad).view();
  }
  /// The float sum of a 16-bit gradient's contributions rounded into grad, once.
  void settle() {
    if constexpr (is_half_float_v<T>) {
      if (wide.data() == nullptr) return;
      grad = on<D>(expr::cast<T>(wide));
      wide = {};
    }
  }
  void write_seed() {
    if (!seed_pending) return;
    grad = tensor<T, D, R>(value.shape(), T(1));
    seed_pending = false;
  }

  void accumulate(tensor<T, D, R>&& g) {
    if (!(g.shape() == value.shape()))
      throw shape_error("locus: ad: internal: a gradient of shape " + g.shape().str() + " for a value of shape " +
                        value.shape().str());
    write_seed();
    if (!has_grad) {
      grad = std::move(g);
      has_grad = true;
    } else if constexpr (is_half_float_v<T>) {
      if (wide.data() == nullptr) wide = on<D>(expr::cast<float>(grad) + expr::cast<float>(g));
      else wide = wide + expr::cast<float>(g);  // in place, in float
    } else {
      grad = grad + g;  // in place, element for element
    }
    grad_is_one = false;
  }
  void run_backward() override {
    if (has_grad && back) back(*this);
  }
  void drop_gradient() noexcept override {
    if (is_parameter) return;
    grad = tensor<T, D, R>{};
    wide = {};
    has_grad = false;
    grad_is_one = false;
    seed_pending = false;
  }
};

/// A var's element as a dual of its compute type (a 16-bit value widened to float, exactly).
template <class T, device D, int R>
struct dual_load {
  const T* p;
  compute_t<T> seed;
  LOCUS_HOST_DEVICE dual<compute_t<T>> operator()(std::size_t i) const {
    if constexpr (R == 0) return {static_cast<compute_t<T>>(p[0]), seed};
    else return {static_cast<compute_t<T>>(p[i]), seed};
  }
};

/// A var read as dual{value, seed}: seed 1 for the operand being differentiated, 0 otherwise. A
/// 16-bit var is read as a dual of floats: derivatives are computed in float.
template <class T, device D, int R>
struct dual_leaf {
  using locus_node = void;
  using value_type = dual<compute_t<T>>;
  using device_type = D;
  static constexpr int rank = R;
  using devices = expr::type_list<D>;
  using operations = expr::type_list<>;

  tensor_view<const T, D, R> view;
  compute_t<T> seed;

  [[nodiscard]] const locus::shape<R>& shape() const noexcept { return view.shape(); }
  [[nodiscard]] dual_load<T, D, R> kernel() const noexcept { return {view.data(), seed}; }
  template <class V>
  void visit(V& v) const {
    v.leaf(id_of<D>, view.name());
  }
  template <class F>
  [[nodiscard]] dual_leaf rebind(F&) const {
    return *this;
  }
};

/// How an operand is spread over the expression it appears in: element for element, as a row
/// repeated over the rows (a bias), as a column (col(v)), or as one value everywhere (rank 0).
enum class spread { same, row, column, all };

template <class P, class C>
constexpr spread child_spread(spread k) {
  if constexpr (C::rank == 0) return spread::all;
  else if constexpr (expr::is_column_v<C>) return spread::column;
  else if constexpr (P::rank == 2 && C::rank == 1) return spread::row;
  else return k;
}

template <class X>
inline constexpr bool is_var_v = false;
template <class T, class D, int R>
inline constexpr bool is_var_v<var<T, D, R>> = true;

template <class X>
inline constexpr bool is_leaf_v = false;
template <class T, class D, int R>
inline constexpr bool is_leaf_v<expr::leaf<T, D, R>> = true;

template <class X>
inline constexpr bool is_node_v = false;
template <class Op, class... Cs>
inline constexpr bool is_node_v<expr::node<Op, Cs...>> = true;

template <class X>
inline constexpr bool is_staged_node_v = expr::is_staged_v<X>;
/// A slice or concat of constants (expr/gather.hpp; with vars they are ad's own steps).
template <class X>
inline constexpr bool is_gather_node_v = requires { X::is_gather; };

/// f(v, spread) for every var the expression reads element by element (not those inside a staged
/// product or reduction: those are constants here, see detach).
template <class N, class F>
void for_each_var(const N& n, F& f, spread k) {
  if constexpr (is_var_v<N>) {
    f(n, k);
  } else if constexpr (is_node_v<N>) {
    std::apply([&](const auto&... c) { (for_each_var(c, f, child_spread<N, std::remove_cvref_t<decltype(c)>>(k)), ...); },
               n.children);
  } else if constexpr (expr::is_column_v<N>) {
    for_each_var(n.child, f, spread::column);
  }
}

/// Which operand a tangent tree seeds: the var `target` where it is spread as `kind`.
struct seed_of {
  const step_base* target;
  spread kind;
};

/// Every var read as a plain leaf (the value, no derivative).
struct as_leaves {
  template <class L>
  L operator()(const L& l) const {
    return l;
  }
};

/// n read in its compute type: a 16-bit operand (bfloat16, half) as cast<float>(n), anything else as
/// it is. The backward kernels compute in float and round once, where the gradient is stored.
template <class N>
auto widened(const N& n) {
  if constexpr (requires { typename N::value_type; } && is_half_float_v<typename N::value_type>)
    return expr::node<ops::cast<float>, N>(ops::cast<float>{}, n);
  else return n;
}

/// n with every operation on dual numbers and the operand `s` seeded (see dual.hpp); 16-bit values
/// are read as floats (widened), so that the tree mixes no element types.
template <class N>
auto tangent(const N& n, const seed_of& s, spread k) {
  if constexpr (is_var_v<N>) {
    using T = compute_t<typename N::value_type>;
    return dual_leaf<typename N::value_type, typename N::device_type, N::rank>{
        n.value(), n.step_ptr() == s.target && k == s.kind ? T(1) : T(0)};
  } else if constexpr (is_node_v<N>) {
    return std::apply(
        [&](const auto&... c) {
          return expr::node<dual_op<std::remove_cvref_t<decltype(n.op)>>,
                            decltype(tangent(c, s, child_spread<N, std::remove_cvref_t<decltype(c)>>(k)))...>(
              {n.op}, tangent(c, s, child_spread<N, std::remove_cvref_t<decltype(c)>>(k))...);
        },
        n.children);
  } else if constexpr (expr::is_column_v<N>) {
    return expr::column<decltype(tangent(n.child, s, spread::column))>{tangent(n.child, s, spread::column)};
  } else if constexpr (is_staged_node_v<N>) {
    as_leaves f;
    return widened(n.rebind(f));  // a product or reduction inside: its value, a constant
  } else {
    return widened(n);  // tensors, scalars, generated values: constants
  }
}

/// The view v kept valid for as long as step s lives: its arena block held, or (memory that is not
/// locus's: a cpu view of the program's own buffer) a copy owned by s.
template <class T, device D, int R>
tensor_view<const T, D, R> kept_view(const tensor_view<const T, D, R>& v, step_base& s) {
  if (v.data() == nullptr) return v;
  backend::storage_hold h(id_of<D>, v.data());
  if (h) {
    s.holds.push_back(std::move(h));
    return v;
  }
  auto copy = std::make_shared<tensor<T, D, R>>(on<D>(expr::copy(v)));
  tensor_view<const T, D, R> out(copy->data(), v.shape(), v.name());
  s.copies.push_back(std::move(copy));
  return out;
}

/// Rebinds the tensor leaves of a staged operand (a product or reduction of constants, computed
/// again by the backward's kernels) to kept views.
struct keep_leaves {
  step_base& s;
  template <class T, class D, int R>
  expr::leaf<T, D, R> operator()(const expr::leaf<T, D, R>& l) const {
    return {kept_view(l.view, s)};
  }
};

/// n as the backward of step s will read it: every constant operand read through a view kept
/// valid (vars keep their own values; owning leaves, scalars and generated values need nothing).
template <class N>
auto keep(const N& n, step_base& s) {
  if constexpr (is_var_v<N>) {
    return n;
  } else if constexpr (is_node_v<N>) {
    return std::apply(
        [&](const auto&... c) {
          return expr::node<std::remove_cvref_t<decltype(n.op)>, decltype(keep(c, s))...>(n.op, keep(c, s)...);
        },
        n.children);
  } else if constexpr (expr::is_column_v<N>) {
    return expr::column<decltype(keep(n.child, s))>{keep(n.child, s)};
  } else if constexpr (is_staged_node_v<N> || is_gather_node_v<N>) {
    keep_leaves f{s};
    return n.rebind(f);
  } else if constexpr (is_leaf_v<N>) {
    return N{kept_view(n.view, s)};
  } else {
    return n;
  }
}

/// upstream * d(tangent)/d(seed) at one element: the chain rule's product, fused.
struct times_derivative {
  static constexpr const char* name = "gradient";
  static constexpr const char* type = "Mul";
  template <class G, class X>
  LOCUS_HOST_DEVICE G operator()(G g, X x) const {
    if constexpr (is_dual_v<X>) return static_cast<G>(g * x.d);
    else return G(0);
  }
};

template <class N>
struct device_of;
template <class D0, class... Ds>
struct device_of<expr::type_list<D0, Ds...>> {
  using type = D0;
};
template <class N>
using device_of_t = typename device_of<typename N::devices>::type;

/// c stored as T: a float contribution to a 16-bit operand rounded once, at the store.
template <class T, class C>
decltype(auto) stored_as(C&& c) {
  if constexpr (is_half_float_v<T> && !std::is_same_v<typename std::remove_cvref_t<C>::value_type, T>)
    return expr::cast<T>(std::forward<C>(c));
  else return std::forward<C>(c);
}

/// The contribution c (of the expression's shape) to an operand of rank RV spread as k over it
/// (a sum over a broadcast axis accumulates in float for a 16-bit operand, rounded once).
template <device D, class T, int RV, class C>
tensor<T, D, RV> reduce_to(const C& c, spread k) {
  if constexpr (RV == C::rank) {
    return on<D>(stored_as<T>(c));
  } else if constexpr (RV == 0) {
    return on<D>(stored_as<T>(expr::sum(c)));
  } else if constexpr (RV == 1 && C::rank == 2) {
    if (k == spread::row) return on<D>(stored_as<T>(expr::sum<0>(c)));
    return on<D>(stored_as<T>(expr::sum<1>(c)));
  } else {
    static_assert(RV == C::rank, "locus: ad: internal: an operand of an unexpected rank");
    return {};
  }
}

/// Passes the gradient g of expression n (g: a node broadcastable to n's shape) to every var n
/// reads: one fused kernel per (var, spread), a reduction over the broadcast axis where it was
/// spread as a row, column or scalar.
template <device D, class N, class G>
void push_gradients(const N& n, const G& g, const step_base* skip = nullptr) {
  std::vector<std::pair<const step_base*, spread>> done;
  auto one = [&](const auto& v, spread k) {
    using V = std::remove_cvref_t<decltype(v)>;
    using T = typename V::value_type;
    constexpr int RV = V::rank;
    static_assert(RV == N::rank || RV == 0 || (RV == 1 && N::rank == 2), "locus: ad: internal: an operand's rank");
    const step_base* target = v.step_ptr();
    if (!target->requires_grad || target == skip) return;
    for (const auto& [p, kind] : done)
      if (p == target && kind == k) return;
    done.emplace_back(target, k);
    auto t = tangent(n, seed_of{target, k}, spread::same);
    auto gw = widened(g);
    auto contribution =
        expr::node<times_derivative, decltype(gw), decltype(t)>(times_derivative{}, std::move(gw), std::move(t));
    auto c = reduce_to<D, T, RV>(contribution, k);
    v.step()->accumulate(std::move(c));
  };
  for_each_var(n, one, spread::same);
}

/// The child of n whose gradient is n's own gradient unchanged, or -1: a var of n's rank and
/// element type added to something (`matmul(h, W) + b`: the product's gradient is the logits'),
/// or the left side of a subtraction. evaluate's backward hands it the gradient tensor itself
/// (no kernel) when it is the only place the var appears in n.
template <class N>
constexpr int pass_through_child() {
  if constexpr (is_node_v<N>) {
    using Op = std::remove_cvref_t<decltype(std::declval<const N&>().op)>;
    using Ch = std::remove_cvref_t<decltype(std::declval<const N&>().children)>;
    if constexpr ((std::is_same_v<Op, ops::add> || std::is_same_v<Op, ops::sub>) && std::tuple_size_v<Ch> == 2) {
      using A = std::tuple_element_t<0, Ch>;
      using B = std::tuple_element_t<1, Ch>;
      using T = typename N::value_type;
      if constexpr (is_var_v<A> && A::rank == N::rank && std::is_same_v<typename A::value_type, T>) return 0;
      else if constexpr (std::is_same_v<Op, ops::add> && is_var_v<B> && B::rank == N::rank &&
                         std::is_same_v<typename B::value_type, T>)
        return 1;
      else return -1;
    } else {
      return -1;
    }
  } else {
    return -1;
  }
}

/// How many times n reads the var of step `target` element by element.
template <class N>
int occurrences(const N& n, const step_base* target) {
  int count = 0;
  auto f = [&](const auto& v, spread) { count += v.step_ptr() == target ? 1 : 0; };
  for_each_var(n, f, spread::same);
  return count;
}

template <class T>
constexpr void check_differentiable() {
  static_assert(std::is_floating_point_v<T> || is_half_float_v<T>,
                "locus: ad: only floating-point values are differentiated");
}

}  // namespace detail

/// A differentiable value on device D. Copies share the value (a handle); the gradient of a
/// parameter is read with grad() after ad::backward.
template <class T, device D, int R>
class var {
public:
  using locus_node = void;
  using value_type = T;
  using device_type = D;
  static constexpr int rank = R;
  using devices = expr::type_list<D>;
  using operations = expr::type_list<>;
  static constexpr bool has_var = true;

  var() = default;
  explicit var(std::shared_ptr<detail::step<T, D, R>> s) : step_(std::move(s)) {}

  [[nodiscard]] tensor_view<const T, D, R> value() const { return checked().value; }
  [[nodiscard]] const locus::shape<R>& shape() const { return checked().value.shape(); }
  /// Whether a gradient flows to it (a parameter, or a value computed from one).
  [[nodiscard]] bool requires_grad() const { return checked().requires_grad; }
  /// The gradient after ad::backward: zeros of the value's shape when none reached it. A 16-bit
  /// gradient's float sum is rounded into the copy and kept (a later backward adds to the sum).
  [[nodiscard]] tensor<T, D, R> grad() const {
    auto& s = checked();
    s.write_seed();
    if constexpr (is_half_float_v<T>)
      if (s.wide.data() != nullptr) return on<D>(expr::cast<T>(s.wide));
    if (s.has_grad) return s.grad.clone();
    return tensor<T, D, R>(s.value.shape(), T(0));
  }
  /// The gradient, moved out (no copy); the var has none afterwards.
  [[nodiscard]] tensor<T, D, R> take_grad() {
    auto& s = checked();
    s.write_seed();
    s.settle();
    tensor<T, D, R> g = s.has_grad ? std::move(s.grad) : tensor<T, D, R>(s.value.shape(), T(0));
    s.grad = tensor<T, D, R>{};
    s.has_grad = false;
    return g;
  }

  // The expression-node protocol (expr/node.hpp): a var is read like a tensor.
  [[nodiscard]] auto kernel() const {
    if constexpr (R == 0) return expr::load_first_kernel<T>{checked().value.data()};
    else return expr::load_kernel<T>{checked().value.data()};
  }
  template <class V>
  void visit(V& v) const {
    v.leaf(id_of<D>, checked().value.name());
  }
  template <class F>
  [[nodiscard]] auto rebind(F& f) const {
    return f(expr::leaf<T, D, R>{checked().value});
  }

  // For ad's steps.
  [[nodiscard]] detail::step<T, D, R>* step() const { return step_.get(); }
  [[nodiscard]] const detail::step_base* step_ptr() const { return step_.get(); }
  [[nodiscard]] const std::shared_ptr<detail::step<T, D, R>>& shared_step() const { return step_; }

private:
  detail::step<T, D, R>& checked() const {
    if (!step_) throw shape_error("locus: ad: a default-constructed var used as a value");
    return *step_;
  }
  std::shared_ptr<detail::step<T, D, R>> step_;
};

namespace detail {
/// A rank-0 operand reads its one element: one without storage would read through a null pointer.
template <class V>
void check_parameter(const V& v) {
  if constexpr (V::rank == 0)
    if (v.data() == nullptr)
      throw shape_error("locus: ad::parameter: an empty rank-0 tensor (default-constructed or moved-from)");
}
}  // namespace detail

/// t as a parameter: a var whose value is a view of t (t must outlive it) and whose gradient
/// ad::backward fills.
template <class T, device D, int R>
[[nodiscard]] var<T, D, R> parameter(const tensor<T, D, R>& t) {
  detail::check_differentiable<T>();
  detail::check_parameter(t);
  auto s = std::make_shared<detail::step<T, D, R>>();
  s->value = t.view();
  s->holds.emplace_back(id_of<D>, t.data());  // its memory stays valid while the var lives
  s->requires_grad = true;
  s->is_parameter = true;
  return var<T, D, R>(std::move(s));
}
template <class T, device D, int R>
[[nodiscard]] var<T, D, R> parameter(const tensor_view<T, D, R>& t) {
  detail::check_differentiable<std::remove_const_t<T>>();
  detail::check_parameter(t);
  auto s = std::make_shared<detail::step<std::remove_const_t<T>, D, R>>();
  s->value = t;
  s->holds.emplace_back(id_of<D>, t.data());
  s->requires_grad = true;
  s->is_parameter = true;
  return var<std::remove_const_t<T>, D, R>(std::move(s));
}

/// A var's value as a constant operand (no gradient flows through it): the max of a stable
/// softmax, a target computed from the parameters.
template <class T, device D, int R>
[[nodiscard]] expr::leaf<T, D, R> detach(const var<T, D, R>& v) {
  return {v.value()};
}

/// An expression of vars evaluated into a new var: one fused kernel forward, and backward one per
/// variable operand (see the top of this file). A var is returned as it is.
template <class E>
  requires expr::has_var_v<expr::node_t<E>>
[[nodiscard]] auto evaluate(E&& e) {
  auto n = expr::as_node(std::forward<E>(e));
  using N = decltype(n);
  using T = typename N::value_type;
  using D = detail::device_of_t<N>;
  constexpr int R = N::rank;
  detail::check_differentiable<T>();
  if constexpr (detail::is_var_v<N>) {
    return n;
  } else {
    auto s = std::make_shared<detail::step<T, D, R>>();
    s->owned = on<D>(n);
    s->value = std::as_const(s->owned).view();
    auto collect = [&](const auto& v, detail::spread) {
      s->inputs.push_back(v.shared_step());
      s->requires_grad = s->requires_grad || v.requires_grad();
    };
    detail::for_each_var(n, collect, detail::spread::same);
    if (s->requires_grad)
      s->back = [n = detail::keep(n, *s)](detail::step<T, D, R>& self) {
        using K = std::remove_cvref_t<decltype(n)>;
        const expr::leaf<T, D, R> g{self.upstream()};
        constexpr int k = detail::pass_through_child<K>();
        if constexpr (k >= 0) {
          const auto& v = std::get<k>(n.children);
          if (v.requires_grad() && detail::occurrences(n, v.step_ptr()) == 1) {
            detail::push_gradients<D>(n, g, v.step_ptr());  // the other operands first: they read g
            v.step()->accumulate(std::move(self.grad));     // then the gradient itself, no kernel
            self.has_grad = false;
            return;
          }
        }
        detail::push_gradients<D>(n, g);
      };
    return var<T, D, R>(std::move(s));
  }
}

/// A value used more than once, computed once: `auto h = ad::keep(relu(matmul(x, W1) + b1));`
/// then `matmul(h, W2) + h` runs relu's kernel once forward and accumulates h's gradient once
/// backward (an expression written twice is otherwise computed twice). For an expression of vars
/// it is evaluate(e); for one of plain tensors (a forward function called to predict) the tensor
/// on its device. A var is handed on as it is, a named tensor as a view of it (no copy), a view as
/// it is, a temporary tensor moved: `auto h = ad::keep(...)` works for all of them.
template <class E>
  requires expr::operand<E>
[[nodiscard]] auto keep(E&& e) {
  using V = std::remove_cvref_t<E>;
  if constexpr (expr::has_var_v<expr::node_t<E>>) return evaluate(std::forward<E>(e));
  else if constexpr (locus::detail::is_tensor<V>::value && std::is_lvalue_reference_v<E>) return std::as_const(e).view();
  else if constexpr (locus::detail::is_tensor<V>::value) return V(std::move(e));
  else if constexpr (locus::detail::is_tensor_view<V>::value) return V(e);
  else return locus::eval(std::forward<E>(e));
}

/// The gradient of the rank-0 `loss` with respect to every parameter it depends on, accumulated
/// into the parameters' vars (read them with grad() / take_grad()). Each step runs once, newest
/// first; an intermediate's gradient is freed as soon as it has been passed on.
template <class T, device D>
void backward(const var<T, D, 0>& loss) {
  auto* root = loss.step();
  if (root == nullptr) throw shape_error("locus: ad: backward of a default-constructed var");
  if (!root->requires_grad) return;  // no parameter reached: every gradient is zero
  std::vector<detail::step_base*> steps{root};
  std::unordered_set<const detail::step_base*> seen{root};
  for (std::size_t i = 0; i < steps.size(); ++i)
    for (const auto& in : steps[i]->inputs)
      if (in && in->requires_grad && seen.insert(in.get()).second) steps.push_back(in.get());
  // Every step that would refuse is found before anything is written: no gradient half-updated.
  for (const auto* s : steps)
    if (s->spent != nullptr) throw shape_error(s->spent);
  // The seed d loss / d loss = 1 is written only if the root's backward reads it as a tensor
  // (softmax_cross_entropy's does not: its kept gradient is the answer as it is).
  if (root->has_grad || !root->back) {
    root->accumulate(tensor<T, D, 0>(shape<0>{}, T(1)));  // a parameter's: added to what it holds
  } else {
    root->has_grad = true;
    root->grad_is_one = true;
    root->seed_pending = true;
  }
  std::sort(steps.begin(), steps.end(), [](const auto* a, const auto* b) { return a->order > b->order; });
  for (auto* s : steps) {
    s->run_backward();
    s->drop_gradient();
  }
}

}  // namespace locus::ad

namespace locus {
template <class Device, class T>
struct has_kernel<ad::detail::times_derivative, Device, ad::dual<T>> : has_kernel<ops::mul, Device, T> {};
}  // namespace locus
