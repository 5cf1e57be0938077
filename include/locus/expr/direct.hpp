#pragma once
// Direct evaluation: an elementwise expression whose memory operands all have the result's shape
// (no broadcast, no generated operand) is also a function of their VALUES at one index. Its leaves
// become input sequences and the tree an n-ary functor, so a GPU can hand the expression to
// cub::DeviceTransform with raw pointers as inputs: CUB then loads them with its bulk-copy and
// prefetching paths (measured on an H200: 1.05x the device copy's bandwidth, against 0.88x for the
// same functor reading by index; bench/RESULTS-gpu.md).
//
//   direct::capable<N>                 N can be evaluated this way
//   direct::inputs(n)                  std::tuple of its leaves' pointers, depth-first, left to right
//   direct::function(n)                the functor: f(v0, v1, ...) = the expression at one index,
//                                      v_k the value of input k there
#include <locus/config.hpp>
#include <locus/expr/node.hpp>
#include <locus/tensor/half.hpp>

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace locus::expr::direct {

namespace detail {
/// The I-th of the values.
template <std::size_t I, class V0, class... Vs>
LOCUS_HOST_DEVICE constexpr auto pick(const V0& v0, const Vs&... vs) {
  if constexpr (I == 0) return v0;
  else return pick<I - 1>(vs...);
}

template <class N, int R>
struct traits {
  static constexpr bool ok = false;
  static constexpr std::size_t inputs = 0;
};
template <class T, class D, int LR, int R>
struct traits<leaf<T, D, LR>, R> {
  static constexpr bool ok = LR == R && R > 0;
  static constexpr std::size_t inputs = 1;
};
template <class T, class D, int LR, int R>
struct traits<owning_leaf<T, D, LR>, R> {
  static constexpr bool ok = LR == R && R > 0;
  static constexpr std::size_t inputs = 1;
};
template <class T, int R>
struct traits<scalar<T>, R> {
  static constexpr bool ok = true;
  static constexpr std::size_t inputs = 0;
};
template <class Op, class... Cs, int R>
struct traits<node<Op, Cs...>, R> {
  static constexpr bool ok = node<Op, Cs...>::rank == R && (traits<Cs, R>::ok && ...);
  static constexpr std::size_t inputs = (traits<Cs, R>::inputs + ... + 0);
};

/// The functors: Off is the position of the node's first input among all of them.
template <class T, std::size_t Off>
struct input_fn {
  LOCUS_EXEC_CHECK_DISABLE
  template <class... V>
  LOCUS_HOST_DEVICE compute_t<T> operator()(const V&... v) const {
    return static_cast<compute_t<T>>(pick<Off>(v...));
  }
};
template <class T>
struct constant_fn {
  T value;
  template <class... V>
  LOCUS_HOST_DEVICE compute_t<T> operator()(const V&...) const {
    return static_cast<compute_t<T>>(value);
  }
};
template <class Op, class... Fs>
struct apply_fn;
template <class Op, class A>
struct apply_fn<Op, A> {
  Op op;
  A a;
  LOCUS_EXEC_CHECK_DISABLE
  template <class... V>
  LOCUS_HOST_DEVICE auto operator()(const V&... v) const {
    return op(a(v...));
  }
};
template <class Op, class A, class B>
struct apply_fn<Op, A, B> {
  Op op;
  A a;
  B b;
  LOCUS_EXEC_CHECK_DISABLE
  template <class... V>
  LOCUS_HOST_DEVICE auto operator()(const V&... v) const {
    return op(a(v...), b(v...));
  }
};
template <class Op, class A, class B, class C>
struct apply_fn<Op, A, B, C> {
  Op op;
  A a;
  B b;
  C c;
  LOCUS_EXEC_CHECK_DISABLE
  template <class... V>
  LOCUS_HOST_DEVICE auto operator()(const V&... v) const {
    return op(a(v...), b(v...), c(v...));
  }
};

template <std::size_t Off, int R, class N>
auto make(const N& n);

/// The inputs of the first K children of a node.
template <int R, class Tuple, std::size_t K>
constexpr std::size_t inputs_before() {
  return []<std::size_t... J>(std::index_sequence<J...>) {
    return (traits<std::tuple_element_t<J, Tuple>, R>::inputs + ... + std::size_t{0});
  }(std::make_index_sequence<K>{});
}

/// The children's functors, each told where its inputs start.
template <std::size_t Off, int R, class Op, class Tuple, std::size_t... I>
auto make_children(const Op& op, const Tuple& children, std::index_sequence<I...>) {
  return apply_fn<Op, decltype(make<Off + inputs_before<R, Tuple, I>(), R>(std::get<I>(children)))...>{
      op, make<Off + inputs_before<R, Tuple, I>(), R>(std::get<I>(children))...};
}

template <std::size_t Off, int R, class N>
auto make(const N& n) {
  if constexpr (requires { n.view; }) return input_fn<typename N::value_type, Off>{};
  else if constexpr (requires { n.value->data(); }) return input_fn<typename N::value_type, Off>{};
  else if constexpr (requires { n.value; }) return constant_fn<typename N::value_type>{n.value};
  else
    return make_children<Off, R>(n.op, n.children,
                                 std::make_index_sequence<std::tuple_size_v<std::remove_cvref_t<decltype(n.children)>>>{});
}

template <class N>
auto collect(const N& n) {
  if constexpr (requires { n.view; }) return std::tuple<const typename N::value_type*>{n.view.data()};
  else if constexpr (requires { n.value->data(); }) return std::tuple<const typename N::value_type*>{n.value->data()};
  else if constexpr (requires { n.value; }) return std::tuple<>{};
  else return std::apply([](const auto&... c) { return std::tuple_cat(collect(c)...); }, n.children);
}
}  // namespace detail

/// N (an elementwise node of its own rank) reads every memory operand at the result's index.
template <class N, class P = std::remove_cvref_t<N>>
inline constexpr bool capable = detail::traits<P, P::rank>::ok && (detail::traits<P, P::rank>::inputs > 0);

/// The leaves' pointers, in the order the functor takes their values.
template <class N>
  requires capable<N>
[[nodiscard]] auto inputs(const N& n) {
  return detail::collect(n);
}

/// f(v0, v1, ...): the expression at one index from its inputs' values there.
template <class N>
  requires capable<N>
[[nodiscard]] auto function(const N& n) {
  return detail::make<0, N::rank>(n);
}

}  // namespace locus::expr::direct
