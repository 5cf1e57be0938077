#pragma once
// The expression vocabulary: + - * / and unary -, comparisons, exp log sqrt abs tanh sigmoid relu
// pow min max, where(cond, a, b), cast<U>(e), copy(e), map(f, e...). Each returns a node that is
// evaluated only when bound to a device (on<D>(e), `c = e`, `tensor<T, D> c = e`).
//
// Operands: tensors, tensor views, nodes, and products and reductions (`relu(matmul(x, W) + b)`:
// the product is written into a temporary on the target device, the rest fused over it). Scalars
// on either side take the element type of the other operand (`a * 2.0` with float `a` stays
// float). Overloads are constrained to locus operands, so they never take part in unrelated
// overload sets. A temporary tensor operand is moved into the
// expression; an lvalue tensor is referenced and must outlive it.
#include <locus/config.hpp>
#include <locus/expr/node.hpp>
#include <locus/expr/ops.hpp>
#include <locus/tensor/tensor.hpp>

#include <memory>
#include <type_traits>
#include <utility>

namespace locus::expr {

/// A locus expression operand: tensor, tensor_view, expression node, or a product or reduction
/// (evaluated into a temporary first: expr::staged).
template <class X>
concept operand = locus::detail::expression_node<X> || locus::detail::special_expression<X> ||
                  locus::detail::is_tensor<std::remove_cvref_t<X>>::value ||
                  locus::detail::is_tensor_view<std::remove_cvref_t<X>>::value;

template <class X>
concept scalar_operand = std::is_arithmetic_v<std::remove_cvref_t<X>>;

/// The node an operand becomes.
template <operand X>
[[nodiscard]] auto as_node(X&& x) {
  using V = std::remove_cvref_t<X>;
  if constexpr (locus::detail::is_tensor<V>::value || locus::detail::is_tensor_view<V>::value) {
    // A rank-0 operand reads its one element: one without storage (a default-constructed or
    // moved-from tensor) would read through a null pointer.
    if constexpr (V::rank == 0)
      if (x.data() == nullptr)
        throw shape_error("locus: an empty rank-0 tensor (default-constructed or moved-from) used as an operand");
  }
  if constexpr (locus::detail::is_tensor<V>::value) {
    using L = leaf<typename V::value_type, typename V::device_type, V::rank>;
    if constexpr (std::is_lvalue_reference_v<X>) return L{std::as_const(x).view()};
    else return owning_leaf<typename V::value_type, typename V::device_type, V::rank>{std::make_shared<const V>(std::move(x))};
  } else if constexpr (locus::detail::is_tensor_view<V>::value) {
    return leaf<typename V::value_type, typename V::device_type, V::rank>{x};
  } else if constexpr (locus::detail::special_expression<V>) {
    return staged<V>{V(std::forward<X>(x))};
  } else {
    return V(std::forward<X>(x));
  }
}

template <class X>
using node_t = decltype(as_node(std::declval<X>()));

namespace detail {
/// A scalar becomes a scalar node of the element type of `Like`.
/// Beside a 16-bit float operand the scalar is a float (the kernel computes in float: `h * 0.1` is
/// not rounded to 16 bits first).
template <class Like, class S>
auto scalar_like(S s) {
  using T = compute_t<typename node_t<Like>::value_type>;
  return scalar<T>{static_cast<T>(s)};
}
template <class X, class Like>
auto to_node(X&& x) {
  if constexpr (operand<X>) return as_node(std::forward<X>(x));
  else return scalar_like<Like>(x);
}

template <class Op, class A, class B>
auto make_binary(Op op, A&& a, B&& b) {
  if constexpr (operand<A> && operand<B>) {
    return node<Op, node_t<A>, node_t<B>>(op, as_node(std::forward<A>(a)), as_node(std::forward<B>(b)));
  } else if constexpr (operand<A>) {
    auto na = as_node(std::forward<A>(a));
    using S = scalar<compute_t<typename decltype(na)::value_type>>;
    return node<Op, decltype(na), S>(op, std::move(na), S{static_cast<typename S::value_type>(b)});
  } else {
    auto nb = as_node(std::forward<B>(b));
    using S = scalar<compute_t<typename decltype(nb)::value_type>>;
    return node<Op, S, decltype(nb)>(op, S{static_cast<typename S::value_type>(a)}, std::move(nb));
  }
}
}  // namespace detail

template <class A, class B>
concept binary_operands = (operand<A> && (operand<B> || scalar_operand<B>)) || (scalar_operand<A> && operand<B>);

#define LOCUS_DETAIL_OPERATOR(SYM, OP)                                  \
  template <class A, class B>                                           \
    requires binary_operands<A, B>                                      \
  [[nodiscard]] auto operator SYM(A&& a, B&& b) {                       \
    return detail::make_binary(OP{}, std::forward<A>(a), std::forward<B>(b)); \
  }
LOCUS_DETAIL_OPERATOR(+, ops::add)
LOCUS_DETAIL_OPERATOR(-, ops::sub)
LOCUS_DETAIL_OPERATOR(*, ops::mul)
LOCUS_DETAIL_OPERATOR(/, ops::div)
LOCUS_DETAIL_OPERATOR(<, ops::less)
LOCUS_DETAIL_OPERATOR(<=, ops::less_equal)
LOCUS_DETAIL_OPERATOR(>, ops::greater)
LOCUS_DETAIL_OPERATOR(>=, ops::greater_equal)
LOCUS_DETAIL_OPERATOR(==, ops::equal)
LOCUS_DETAIL_OPERATOR(!=, ops::not_equal)
#undef LOCUS_DETAIL_OPERATOR

#define LOCUS_DETAIL_BINARY_FUNCTION(NAME, OP)                          \
  template <class A, class B>                                           \
    requires binary_operands<A, B>                                      \
  [[nodiscard]] auto NAME(A&& a, B&& b) {                               \
    return detail::make_binary(OP{}, std::forward<A>(a), std::forward<B>(b)); \
  }
LOCUS_DETAIL_BINARY_FUNCTION(pow, ops::pow)
LOCUS_DETAIL_BINARY_FUNCTION(min, ops::minimum)
LOCUS_DETAIL_BINARY_FUNCTION(max, ops::maximum)
#undef LOCUS_DETAIL_BINARY_FUNCTION

#define LOCUS_DETAIL_UNARY_FUNCTION(NAME, OP)                           \
  template <operand A>                                                  \
  [[nodiscard]] auto NAME(A&& a) {                                      \
    return node<OP, node_t<A>>(OP{}, as_node(std::forward<A>(a)));      \
  }
LOCUS_DETAIL_UNARY_FUNCTION(operator-, ops::neg)
LOCUS_DETAIL_UNARY_FUNCTION(exp, ops::exp)
LOCUS_DETAIL_UNARY_FUNCTION(log, ops::log)
LOCUS_DETAIL_UNARY_FUNCTION(sqrt, ops::sqrt)
LOCUS_DETAIL_UNARY_FUNCTION(abs, ops::abs)
LOCUS_DETAIL_UNARY_FUNCTION(tanh, ops::tanh)
LOCUS_DETAIL_UNARY_FUNCTION(sigmoid, ops::sigmoid)
LOCUS_DETAIL_UNARY_FUNCTION(relu, ops::relu)
/// copy(x): the elements of x as an expression, so that `t = copy(u)` copies u into t's storage.
LOCUS_DETAIL_UNARY_FUNCTION(copy, ops::identity)
#undef LOCUS_DETAIL_UNARY_FUNCTION

/// col(v): the rank-1 operand v as a column [n, 1], broadcast over the columns of a rank-2
/// expression (a per-row scale: `m * col(s)`; an outer product: `col(u) * v`).
template <operand A>
[[nodiscard]] auto col(A&& a) {
  return column<node_t<A>>{as_node(std::forward<A>(a))};
}

/// cast<U>(e): elementwise static_cast to U.
template <class U, operand A>
[[nodiscard]] auto cast(A&& a) {
  return node<ops::cast<U>, node_t<A>>(ops::cast<U>{}, as_node(std::forward<A>(a)));
}

/// where(cond, a, b): a where cond is true, b elsewhere; a and b may be scalars.
template <operand C, class A, class B>
  requires((operand<A> || scalar_operand<A>) && (operand<B> || scalar_operand<B>))
[[nodiscard]] auto where(C&& cond, A&& a, B&& b) {
  if constexpr (operand<A>) {
    auto na = as_node(std::forward<A>(a));
    auto nb = detail::to_node<B, A>(std::forward<B>(b));
    return node<ops::select, node_t<C>, decltype(na), decltype(nb)>(ops::select{}, as_node(std::forward<C>(cond)),
                                                                     std::move(na), std::move(nb));
  } else if constexpr (operand<B>) {
    auto nb = as_node(std::forward<B>(b));
    auto na = detail::to_node<A, B>(std::forward<A>(a));
    return node<ops::select, node_t<C>, decltype(na), decltype(nb)>(ops::select{}, as_node(std::forward<C>(cond)),
                                                                     std::move(na), std::move(nb));
  } else {
    using R = std::common_type_t<std::remove_cvref_t<A>, std::remove_cvref_t<B>>;
    return node<ops::select, node_t<C>, scalar<R>, scalar<R>>(ops::select{}, as_node(std::forward<C>(cond)),
                                                              scalar<R>{static_cast<R>(a)}, scalar<R>{static_cast<R>(b)});
  }
}

/// map(f, e...): a user's function object applied elementwise to 1 to 3 operands. In a CUDA build f
/// must be callable on the device (__host__ __device__), unless F::host_only is true.
template <class F, operand... A>
  requires(sizeof...(A) >= 1 && sizeof...(A) <= 3 && std::is_trivially_copyable_v<F>)
[[nodiscard]] auto map(F f, A&&... a) {
  return node<ops::mapped<F>, node_t<A>...>(ops::mapped<F>{f}, as_node(std::forward<A>(a))...);
}

}  // namespace locus::expr

namespace locus {
using expr::abs;
using expr::cast;
using expr::col;
using expr::copy;
using expr::exp;
using expr::log;
using expr::map;
using expr::max;
using expr::min;
using expr::pow;
using expr::relu;
using expr::sigmoid;
using expr::sqrt;
using expr::tanh;
using expr::where;
using expr::operator+;
using expr::operator-;
using expr::operator*;
using expr::operator/;
using expr::operator<;
using expr::operator<=;
using expr::operator>;
using expr::operator>=;
using expr::operator==;
using expr::operator!=;
}  // namespace locus
