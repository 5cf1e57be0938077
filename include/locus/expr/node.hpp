#pragma once
// Expression nodes. An expression such as `exp(y) * 2.f - sqrt(y)` is a tree of small host-side
// objects (shapes, names, the devices of its leaves); `kernel()` turns it into ONE trivially
// copyable functor, `k(i)` = value of element i, that runs on host and device. Evaluation is one
// parallel loop / one CUDA kernel with that functor: no temporaries.
//
// Node protocol (what placement and evaluation rely on):
//   locus_node              marker type
//   value_type, rank        element type and rank of the result
//   devices                 type_list of the devices of the leaves (no repeats)
//   operations              type_list of operation<Op, T> for every operation in the tree
//   shape()                 run-time extents, checked when the node is built (shape_error)
//   kernel()                the fused functor
//   visit(v)                v.leaf(device, name) / v.constant() / v.op(name, type), children first
//   rebind(f)               the same tree with every tensor leaf l replaced by f(l)
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/expr/divisor.hpp>
#include <locus/expr/ops.hpp>
#include <locus/tensor/half.hpp>
#include <locus/tensor/shape.hpp>
#include <locus/tensor/tensor.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace locus::expr {

template <class... Xs>
struct type_list {};

/// One operation Op applied to elements of type T: the unit kernel availability is asked about.
template <class Op, class T>
struct operation {};

namespace detail {
template <class L, class X>
struct insert_unique;
template <class... Xs, class X>
struct insert_unique<type_list<Xs...>, X> {
  using type = std::conditional_t<(std::is_same_v<X, Xs> || ...), type_list<Xs...>, type_list<Xs..., X>>;
};
template <class A, class B>
struct merge_unique;
template <class A>
struct merge_unique<A, type_list<>> {
  using type = A;
};
template <class A, class X, class... Xs>
struct merge_unique<A, type_list<X, Xs...>> {
  using type = typename merge_unique<typename insert_unique<A, X>::type, type_list<Xs...>>::type;
};
template <class... Ls>
struct merge_all {
  using type = type_list<>;
};
template <class L, class... Ls>
struct merge_all<L, Ls...> {
  using type = typename merge_unique<L, typename merge_all<Ls...>::type>::type;
};
}  // namespace detail

template <class... Ls>
using merge_t = typename detail::merge_all<Ls...>::type;

/// True when node N holds a staged operand (expr::staged) anywhere in its tree: such a tree is evaluated in
/// steps. Nodes that hold children say so with `static constexpr bool has_staged`; leaves do not.
template <class N>
inline constexpr bool has_staged_v = [] {
  if constexpr (requires { N::has_staged; }) return bool(N::has_staged);
  else return false;
}();

/// True when node N reads an operand elsewhere than at the result's index anywhere in its tree
/// (a slice or concat, expr/gather.hpp): an assignment must then treat any memory its operands
/// share with the destination as overlap.
template <class N>
inline constexpr bool has_gather_v = [] {
  if constexpr (requires { N::is_gather; }) return true;
  else if constexpr (requires { N::has_gather; }) return bool(N::has_gather);
  else return false;
}();

/// True when node N reads a differentiable variable (locus::ad::var) anywhere in its tree: such a
/// tree is differentiated by locus::ad (ad/var.hpp), and products and sums of it are ad's. Nodes that
/// hold children say so with `static constexpr bool has_var`; a variable says true.
template <class N>
inline constexpr bool has_var_v = [] {
  if constexpr (requires { N::has_var; }) return bool(N::has_var);
  else return false;
}();

// ---------------------------------------------------------------------------------------------
// Kernels: what runs on the device. Trivially copyable, no names, no ownership.
//
// k(i) is element i. A rank-2 evaluation on the host also knows the row r and column c of i
// (i == r * cols + c) and calls expr::at(k, i, r, c): broadcasting kernels take r or c instead of
// dividing i, so a row loop over a bias add is a plain vector loop. Kernels without an `at`
// member answer k(i), which is always right.

LOCUS_EXEC_CHECK_DISABLE
template <class K>
LOCUS_HOST_DEVICE auto at(const K& k, std::size_t i, [[maybe_unused]] std::size_t r, [[maybe_unused]] std::size_t c) {
  if constexpr (requires { k.at(i, r, c); }) return k.at(i, r, c);
  else return k(i);
}

/// A rank-2 expression's kernel for a row loop: k(i), and k(i, r, c) = expr::at(k, i, r, c).
template <class K>
struct row_kernel {
  static_assert(!std::is_reference_v<K>, "locus: a kernel holds its parts by value: it is copied to the device");
  K k;
  LOCUS_EXEC_CHECK_DISABLE
  LOCUS_HOST_DEVICE auto operator()(std::size_t i) const { return k(i); }
  LOCUS_EXEC_CHECK_DISABLE
  LOCUS_HOST_DEVICE auto operator()(std::size_t i, std::size_t r, std::size_t c) const { return expr::at(k, i, r, c); }
};

// Loads widen a 16-bit float to float (exactly): a kernel computes in compute_t<T> and the store
// rounds once.
template <class T>
struct load_kernel {
  const T* p;
  LOCUS_HOST_DEVICE compute_t<T> operator()(std::size_t i) const { return static_cast<compute_t<T>>(p[i]); }
};
template <class T>
struct load_first_kernel {  // a rank-0 tensor: one value on the device, broadcast everywhere
  const T* p;
  LOCUS_HOST_DEVICE compute_t<T> operator()(std::size_t) const { return static_cast<compute_t<T>>(p[0]); }
};
/// A rank-1 operand of a rank-2 expression: a row, repeated over the rows.
template <class K>
struct row_broadcast_kernel {
  static_assert(!std::is_reference_v<K>, "locus: a kernel holds its parts by value: it is copied to the device");
  K k;
  divisor cols;
  LOCUS_HOST_DEVICE auto operator()(std::size_t i) const { return k(cols.mod(i)); }
  LOCUS_HOST_DEVICE auto at(std::size_t, std::size_t, std::size_t c) const { return k(c); }
};
/// col(v) in a rank-2 expression: a column, repeated over the columns.
template <class K>
struct column_broadcast_kernel {
  static_assert(!std::is_reference_v<K>, "locus: a kernel holds its parts by value: it is copied to the device");
  K k;
  divisor cols;
  LOCUS_HOST_DEVICE auto operator()(std::size_t i) const { return k(cols.div(i)); }
  LOCUS_HOST_DEVICE auto at(std::size_t, std::size_t r, std::size_t) const { return k(r); }
};
template <class T>
struct constant_kernel {
  T value;
  LOCUS_HOST_DEVICE compute_t<T> operator()(std::size_t) const { return static_cast<compute_t<T>>(value); }
};
template <class Op, class... Ks>
struct apply_kernel;
template <class Op, class A>
struct apply_kernel<Op, A> {
  static_assert(!std::is_reference_v<A>, "locus: a kernel holds its parts by value: it is copied to the device");
  Op op;
  A a;
  LOCUS_EXEC_CHECK_DISABLE
  LOCUS_HOST_DEVICE auto operator()(std::size_t i) const { return op(a(i)); }
  LOCUS_EXEC_CHECK_DISABLE
  LOCUS_HOST_DEVICE auto at(std::size_t i, std::size_t r, std::size_t c) const { return op(expr::at(a, i, r, c)); }
};
template <class Op, class A, class B>
struct apply_kernel<Op, A, B> {
  static_assert(!std::is_reference_v<A> && !std::is_reference_v<B>, "locus: a kernel holds its parts by value: it is copied to the device");
  Op op;
  A a;
  B b;
  LOCUS_EXEC_CHECK_DISABLE
  LOCUS_HOST_DEVICE auto operator()(std::size_t i) const { return op(a(i), b(i)); }
  LOCUS_EXEC_CHECK_DISABLE
  LOCUS_HOST_DEVICE auto at(std::size_t i, std::size_t r, std::size_t c) const {
    return op(expr::at(a, i, r, c), expr::at(b, i, r, c));
  }
};
template <class Op, class A, class B, class C>
struct apply_kernel<Op, A, B, C> {
  Op op;
  A a;
  B b;
  C c;
  LOCUS_EXEC_CHECK_DISABLE
  LOCUS_HOST_DEVICE auto operator()(std::size_t i) const { return op(a(i), b(i), c(i)); }
  LOCUS_EXEC_CHECK_DISABLE
  LOCUS_HOST_DEVICE auto at(std::size_t i, std::size_t r, std::size_t col) const {
    return op(expr::at(a, i, r, col), expr::at(b, i, r, col), expr::at(c, i, r, col));
  }
};

// ---------------------------------------------------------------------------------------------
// Leaves

/// A tensor (or view) operand, held as a view: the tensor must outlive the expression.
template <class T, class D, int R>
struct leaf {
  using locus_node = void;
  using value_type = T;
  using device_type = D;
  static constexpr int rank = R;
  using devices = type_list<D>;
  using operations = type_list<>;

  tensor_view<const T, D, R> view;

  [[nodiscard]] const locus::shape<R>& shape() const noexcept { return view.shape(); }
  [[nodiscard]] auto kernel() const noexcept {
    if constexpr (R == 0) return load_first_kernel<T>{view.data()};
    else return load_kernel<T>{view.data()};
  }
  template <class V>
  void visit(V& v) const {
    v.leaf(id_of<D>, view.name());
  }
  template <class F>
  [[nodiscard]] auto rebind(F& f) const {
    return f(*this);
  }
};

/// A temporary tensor operand (`to<gpu<1>>(x) + y`): the expression shares ownership of it, so it
/// cannot dangle and the expression stays copyable.
template <class T, class D, int R>
struct owning_leaf {
  using locus_node = void;
  using value_type = T;
  using device_type = D;
  static constexpr int rank = R;
  using devices = type_list<D>;
  using operations = type_list<>;

  std::shared_ptr<const tensor<T, D, R>> value;

  [[nodiscard]] const locus::shape<R>& shape() const noexcept { return value->shape(); }
  [[nodiscard]] auto kernel() const noexcept {
    if constexpr (R == 0) return load_first_kernel<T>{value->data()};
    else return load_kernel<T>{value->data()};
  }
  template <class V>
  void visit(V& v) const {
    v.leaf(id_of<D>, value->name().empty() ? nullptr : value->name().c_str());
  }
  template <class F>
  [[nodiscard]] auto rebind(F& f) const {
    return f(leaf<T, D, R>{value->view()});
  }
};

/// A scalar operand (`2.f`), converted to the element type of the other operand.
template <class T>
struct scalar {
  using locus_node = void;
  using value_type = T;
  static constexpr int rank = 0;
  using devices = type_list<>;
  using operations = type_list<>;

  T value;

  [[nodiscard]] static locus::shape<0> shape() noexcept { return {}; }
  [[nodiscard]] constant_kernel<T> kernel() const noexcept { return {value}; }
  template <class V>
  void visit(V& v) const {
    v.constant();
  }
  template <class F>
  [[nodiscard]] scalar rebind(F&) const {
    return *this;
  }
};

namespace detail {
template <class K>
struct generated_value {
  using type = std::remove_cvref_t<decltype(std::declval<const K&>()(std::size_t{}))>;
};
template <class K>
  requires requires { typename K::value_type; }
struct generated_value<K> {
  using type = typename K::value_type;
};
}  // namespace detail

/// A device-agnostic operand computed from the element index alone (column indices, counter-based
/// random numbers): it runs on whatever device the expression is bound to.
template <class K, int R>
struct generated {
  using locus_node = void;
  /// K::value_type when K says (a 16-bit type it hands on as float), else what K returns.
  using value_type = typename detail::generated_value<K>::type;
  static constexpr int rank = R;
  using devices = type_list<>;
  using operations = type_list<>;

  K generator;
  locus::shape<R> extents;
  const char* name;
  const char* type;

  /// Nothing is allocated for it (a whole reduction reads it directly): its shape is checked here.
  generated(K g, locus::shape<R> s, const char* n, const char* t) : generator(g), extents(s), name(n), type(t) {
    if (extents.size_overflows()) locus::detail::throw_too_many_elements(name, extents.str(), false);
  }

  [[nodiscard]] const locus::shape<R>& shape() const noexcept { return extents; }
  // By value: a kernel is copied to the device, so it must never hold a reference to host memory.
  [[nodiscard]] K kernel() const noexcept { return generator; }
  template <class V>
  void visit(V& v) const {
    v.op(name, type);
  }
  template <class F>
  [[nodiscard]] generated rebind(F&) const {
    return *this;
  }
};

/// col(v): a rank-1 operand used as a column ([n, 1]) of a rank-2 expression.
template <class C>
struct column {
  static_assert(C::rank == 1, "locus: col(v) takes a rank-1 operand");
  using locus_node = void;
  using value_type = typename C::value_type;
  static constexpr int rank = 2;
  static constexpr bool is_column = true;
  static constexpr bool has_staged = has_staged_v<C>;
  static constexpr bool has_var = has_var_v<C>;
  static constexpr bool has_gather = has_gather_v<C>;
  using devices = typename C::devices;
  using operations = typename C::operations;

  C child;

  [[nodiscard]] locus::shape<2> shape() const { return {child.shape()[0], std::size_t{1}}; }
  [[nodiscard]] auto kernel() const { return child.kernel(); }  // the parent node broadcasts it
  template <class V>
  void visit(V& v) const {
    child.visit(v);
  }
  template <class F>
  [[nodiscard]] auto rebind(F& f) const {
    return column<decltype(child.rebind(f))>{child.rebind(f)};
  }
};

template <class C>
inline constexpr bool is_column_v = requires { C::is_column; };


/// A product or reduction used as an operand of an elementwise expression (`relu(matmul(x, W) + b)`,
/// `sum(a) + sum(b)`), or an elementwise expression used as an operand of a product: it cannot be
/// read element by element, so the evaluation first writes it into a temporary from the caching
/// arena on the device the whole expression runs on, then fuses the rest into one kernel over that
/// temporary. Placement sees through it: its devices and operations are those of S.
template <class S>
struct staged {
  using locus_node = void;
  using value_type = typename S::value_type;
  static constexpr int rank = S::rank;
  static constexpr bool has_staged = true;
  static constexpr bool has_var = has_var_v<S>;
  using devices = typename S::devices;
  using operations = typename S::operations;

  S child;

  [[nodiscard]] auto shape() const { return child.shape(); }
  // No kernel(): the evaluation replaces this node by its temporary first (placement/on.hpp).
  template <class V>
  void visit(V& v) const {
    child.visit(v);
  }
  /// f.materialize(child) when f evaluates staged operands; otherwise the same node over the rebound child.
  template <class F>
  [[nodiscard]] auto rebind(F& f) const {
    if constexpr (requires { f.materialize(child); }) return f.materialize(child);
    else return staged<decltype(child.rebind(f))>{child.rebind(f)};
  }
};

template <class N>
inline constexpr bool is_staged_v = false;
template <class S>
inline constexpr bool is_staged_v<staged<S>> = true;

// ---------------------------------------------------------------------------------------------
// Operation nodes

namespace detail {
template <class Op>
const char* op_name() {
  if constexpr (requires { Op::name; }) return Op::name;
  else return "map";
}
template <class Op>
const char* op_type() {
  if constexpr (requires { Op::type; }) return Op::type;
  else return "Map";
}

/// The extents of one operand (none for a scalar), for the message below.
struct extents_ref {
  const std::size_t* data;
  std::size_t rank;
  template <std::size_t R>
  extents_ref(const std::array<std::size_t, R>& e) noexcept : data(e.data()), rank(R) {}  // NOLINT: implicit
};

/// The shape error of an elementwise node whose operands do not agree: one function for every node
/// type (the message is built only when it is thrown, and compiled once, not once per expression).
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_operand_mismatch(const char* op, int rank,
                                                              std::initializer_list<extents_ref> operands);
#if LOCUS_RUNTIME_DEFINITIONS
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_operand_mismatch(const char* op, int rank,
                                                              std::initializer_list<extents_ref> operands) {
  std::string all;
  for (const extents_ref& e : operands) {
    if (e.rank == 0) continue;
    all += (all.empty() ? "" : " and ") + locus::detail::extents_str(e.data, e.rank);
  }
  throw shape_error(std::string("locus: ") + op + ": operand shapes " + all +
                    (rank == 2 ? " do not broadcast (a rank-1 operand is a row and must match the columns; "
                                 "col(v) is a column and must match the rows)"
                               : " do not match"));
}
#endif
/// Rethrows a node's shape error under the name of the call that built the node (dot's product:
/// "locus: mul: operand shapes ..." becomes "locus: dot: operand shapes ..."); others unchanged.
[[noreturn]] LOCUS_RUNTIME_INLINE void rethrow_as(const char* call, const shape_error& e);
#if LOCUS_RUNTIME_DEFINITIONS
[[noreturn]] LOCUS_RUNTIME_INLINE void rethrow_as(const char* call, const shape_error& e) {
  const std::string what = e.what(), mul = "locus: mul: ";
  if (what.compare(0, mul.size(), mul) != 0) throw e;
  throw shape_error(std::string("locus: ") + call + ": " + what.substr(mul.size()));
}
#endif
/// The operands' extents gathered here, not in the node's lambda: nvcc 13's front end mangles a
/// pack expanded inside a braced list in a generic lambda of a class template member.
template <class... Cs>
[[noreturn]] void throw_operand_mismatch_of(const char* op, int rank, const Cs&... children) {
  throw_operand_mismatch(op, rank, {children.shape().extents...});
}
}  // namespace detail

namespace detail {
template <class C>
inline constexpr bool is_scalar_node_v = false;
template <class T>
inline constexpr bool is_scalar_node_v<scalar<T>> = true;

/// An operand that takes part in the element type: not a scalar, and not a rank-0 float (a sum or
/// mean of 16-bit values is a float: `h - mean(h)` is a 16-bit expression, as `h - 0.5f` is).
template <class C>
inline constexpr bool typed_operand_v =
    !is_scalar_node_v<C> && !(C::rank == 0 && std::is_same_v<typename C::value_type, float>);

/// The operands whose element types meet: where(c, a, b)'s condition is not one of them.
template <class Op, class... Cs>
struct value_operands {
  using type = type_list<Cs...>;
};
template <class C, class A, class B>
struct value_operands<ops::select, C, A, B> {
  using type = type_list<A, B>;
};

template <class H, class L>
struct holds;
template <class H, class... Cs>
struct holds<H, type_list<Cs...>> : std::bool_constant<((typed_operand_v<Cs> && std::is_same_v<typename Cs::value_type, H>) || ...)> {};
template <class H, class L>
struct mixes;
template <class H, class... Cs>
struct mixes<H, type_list<Cs...>>
    : std::bool_constant<holds<H, type_list<Cs...>>::value &&
                         ((typed_operand_v<Cs> && !std::is_same_v<typename Cs::value_type, H>) || ...)> {};

/// Some value operand holds H (a 16-bit float type), or holds H and another element type.
template <class H, class Op, class... Cs>
inline constexpr bool holds_v = holds<H, typename value_operands<Op, Cs...>::type>::value;
template <class H, class Op, class... Cs>
inline constexpr bool mixes_v = mixes<H, typename value_operands<Op, Cs...>::type>::value;

/// The element type of Op over Cs: what Op returns on the operands' compute types (float for the
/// 16-bit types), except that a float computed from bfloat16 (half) operands is stored as bfloat16
/// (half), and cast<U> gives U.
template <class Op, class... Cs>
struct stored_type {
  using computed = std::remove_cvref_t<decltype(std::declval<const Op&>()(std::declval<compute_t<typename Cs::value_type>>()...))>;
  using type = std::conditional_t<
      std::is_same_v<computed, float> && holds_v<bfloat16, Op, Cs...>, bfloat16,
      std::conditional_t<std::is_same_v<computed, float> && holds_v<half, Op, Cs...>, half, computed>>;
};
template <class U, class... Cs>
struct stored_type<ops::cast<U>, Cs...> {
  using type = U;
};
}  // namespace detail

/// Op applied elementwise to the children Cs (1 to 3 of them). Broadcasting: rank-0 children
/// (scalars, rank-0 tensors) everywhere; in a rank-2 node a rank-1 child is a row repeated over
/// the rows (a bias), and col(v) a column repeated over the columns; rank-2 children match exactly.
template <class Op, class... Cs>
struct node {
  static_assert(sizeof...(Cs) >= 1 && sizeof...(Cs) <= 3, "locus: an expression node takes 1 to 3 operands");
  using locus_node = void;
  static constexpr int rank = std::max({Cs::rank...});
  static_assert(((Cs::rank == 0 || Cs::rank == rank || (rank == 2 && Cs::rank == 1)) && ...),
                "locus: the operands of an elementwise expression must have the same rank, be scalars, or be "
                "rows (rank 1) of a rank-2 expression");
  static_assert(!detail::mixes_v<bfloat16, Op, Cs...>,
                "locus: an expression mixes bfloat16 operands with operands of another element type: write the "
                "conversion, cast<float>(x) on the bfloat16 one (computed and stored in float) or cast<bfloat16>(y) "
                "on the other (stored in bfloat16)");
  static_assert(!detail::mixes_v<half, Op, Cs...>,
                "locus: an expression mixes half operands with operands of another element type: write the "
                "conversion, cast<float>(x) on the half one (computed and stored in float) or cast<half>(y) on the "
                "other (stored in half)");
  /// What the kernel computes in float for 16-bit operands, stored as their type (detail::stored_type).
  using value_type = typename detail::stored_type<Op, Cs...>::type;
  /// The element type kernel availability is asked about: the common type of the operands.
  using operand_type = std::common_type_t<compute_t<typename Cs::value_type>...>;
  using devices = merge_t<typename Cs::devices...>;
  using operations = merge_t<type_list<operation<Op, operand_type>>, typename Cs::operations...>;
  static constexpr bool has_staged = (has_staged_v<Cs> || ...);
  static constexpr bool has_var = (has_var_v<Cs> || ...);
  static constexpr bool has_gather = (has_gather_v<Cs> || ...);

  Op op;
  std::tuple<Cs...> children;
  locus::shape<rank> extents;

  explicit node(Op o, Cs... cs) : op(o), children(std::move(cs)...), extents(common_shape()) {}

  [[nodiscard]] const locus::shape<rank>& shape() const noexcept { return extents; }

  [[nodiscard]] auto kernel() const {
    return std::apply(
        [&](const auto&... c) { return apply_kernel<Op, decltype(child_kernel(c))...>{op, child_kernel(c)...}; },
        children);
  }
  template <class V>
  void visit(V& v) const {
    std::apply([&](const auto&... c) { (c.visit(v), ...); }, children);
    v.op(detail::op_name<Op>(), detail::op_type<Op>());
  }
  template <class F>
  [[nodiscard]] auto rebind(F& f) const {
    return std::apply(
        [&](const auto&... c) { return node<Op, decltype(c.rebind(f))...>(op, c.rebind(f)...); }, children);
  }

private:
  template <class C>
  auto child_kernel(const C& c) const {
    if constexpr (rank == 2 && C::rank == 1) return row_broadcast_kernel<std::remove_cvref_t<decltype(c.kernel())>>{c.kernel(), divisor(extents[1])};
    else if constexpr (rank == 2 && is_column_v<C>) return column_broadcast_kernel<std::remove_cvref_t<decltype(c.kernel())>>{c.kernel(), divisor(extents[1])};
    else return c.kernel();
  }

  locus::shape<rank> common_shape() const {
    // Each extent is fixed by the first child that has it; every other child must agree.
    std::array<std::size_t, static_cast<std::size_t>(rank)> ext{};
    std::array<bool, static_cast<std::size_t>(rank)> known{};
    bool mismatch = false;
    auto fix = [&](std::size_t dim, std::size_t e) {
      if (!known[dim]) {
        ext[dim] = e;
        known[dim] = true;
      } else if (ext[dim] != e) {
        mismatch = true;
      }
    };
    auto one = [&](const auto& child) {
      using C = std::remove_cvref_t<decltype(child)>;
      if constexpr (C::rank > 0) {
        if constexpr (rank == 2 && C::rank == 1) fix(1, child.shape()[0]);
        else if constexpr (is_column_v<C>) fix(0, child.shape()[0]);
        else if constexpr (rank > 0)
          for (std::size_t d = 0; d < static_cast<std::size_t>(rank); ++d) fix(d, child.shape()[d]);
      }
    };
    std::apply([&](const auto&... c) { (one(c), ...); }, children);
    if (mismatch)  // the message is built only when it is needed
      std::apply([](const auto&... c) { detail::throw_operand_mismatch_of(detail::op_name<Op>(), rank, c...); },
                 children);
    if constexpr (rank > 0)
      for (std::size_t d = 0; d < static_cast<std::size_t>(rank); ++d)
        if (!known[d]) ext[d] = 1;  // col(v) alone: [n, 1]
    return locus::shape<rank>(ext);
  }
};

}  // namespace locus::expr
