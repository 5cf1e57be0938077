#pragma once
// Slices along any axis and concatenation, as expression operands (issue 30):
//
//   slice<1>(m, 2, 5)           columns [2, 5) of m: an operand read through an index map, fused
//                               into the kernel that reads it (slice<0> of a tensor stays a view)
//   concat<1>(a, b, c)          a, b and c side by side along axis 1 (any axis): one operand
//
// Both read their operands element by element inside the consuming kernel: no temporary, no
// launch of their own; the placement log shows them as `slice: (Slice)` and `concat: (ConcatV2)`.
// They are read-only operands, not destinations. Their operands may be any expression; with
// locus::ad variables the ad versions (ad/ops.hpp) are chosen, which differentiate them.
#include <locus/config.hpp>
#include <locus/errors.hpp>
#include <locus/expr/divisor.hpp>
#include <locus/expr/node.hpp>
#include <locus/expr/operators.hpp>
#include <locus/tensor/shape.hpp>
#include <locus/tensor/slice.hpp>
#include <locus/tensor/tensor.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace locus::expr {

namespace detail {
/// Element i of a row-major shape split at axis A: i = (outer * extent + mid) * inner + in.
struct axis_split {
  divisor inner;   ///< the product of the extents after A
  divisor extent;  ///< the extent of A in the result
  LOCUS_HOST_DEVICE void operator()(std::size_t i, std::size_t& outer, std::size_t& mid, std::size_t& in) const {
    const std::size_t q = inner.div(i);
    in = i - q * inner.value();
    outer = extent.div(q);
    mid = q - outer * extent.value();
  }
};

template <int R>
std::size_t inner_of(const locus::shape<R>& s, int axis) {
  std::size_t n = 1;
  for (int d = axis + 1; d < R; ++d) n *= s[static_cast<std::size_t>(d)];
  return n;
}
}  // namespace detail

/// Indices [first, first + result extent) of the child's axis A, element i of the result.
template <class K>
struct slice_kernel {
  static_assert(!std::is_reference_v<K>, "locus: a kernel holds its parts by value: it is copied to the device");
  K k;
  detail::axis_split split;
  std::size_t child_extent;
  std::size_t first;
  LOCUS_EXEC_CHECK_DISABLE
  LOCUS_HOST_DEVICE auto operator()(std::size_t i) const {
    std::size_t outer, mid, in;
    split(i, outer, mid, in);
    return k((outer * child_extent + first + mid) * split.inner.value() + in);
  }
};

/// a then b along axis A (extents na and nb there), element i of the result.
template <class A, class B>
struct concat_kernel {
  static_assert(!std::is_reference_v<A> && !std::is_reference_v<B>,
                "locus: a kernel holds its parts by value: it is copied to the device");
  A a;
  B b;
  detail::axis_split split;
  std::size_t na, nb;
  LOCUS_EXEC_CHECK_DISABLE
  LOCUS_HOST_DEVICE auto operator()(std::size_t i) const {
    std::size_t outer, mid, in;
    split(i, outer, mid, in);
    const std::size_t inner = split.inner.value();
    return mid < na ? a((outer * na + mid) * inner + in) : b((outer * nb + (mid - na)) * inner + in);
  }
};

/// slice<Axis>(child, first, last) as an operand.
template <int Axis, class C>
struct sliced {
  using locus_node = void;
  using value_type = typename C::value_type;
  static constexpr int rank = C::rank;
  static_assert(rank >= 1 && Axis >= 0 && Axis < rank, "locus: internal: slice axis out of range");
  static constexpr bool is_gather = true;  // reads its operands elsewhere than at the result's index
  static constexpr bool has_staged = has_staged_v<C>;
  static constexpr bool has_var = has_var_v<C>;
  using devices = typename C::devices;
  using operations = typename C::operations;

  C child;
  std::size_t first;
  locus::shape<rank> extents;

  /// Not a destination: a slice of axis 1 or more is not a view (a view has no strides).
  template <class X>
  void operator=(X&&) const {
    static_assert(sizeof(X) == 0,
                  "locus: slice<Axis>(t, first, last) with Axis > 0 is an operand, not a destination (a view is a "
                  "pointer and a shape, without strides; only slice<0> is a view): write the result into a tensor");
  }

  [[nodiscard]] const locus::shape<rank>& shape() const noexcept { return extents; }
  [[nodiscard]] auto kernel() const {
    using K = std::remove_cvref_t<decltype(child.kernel())>;
    return slice_kernel<K>{child.kernel(),
                           {divisor(detail::inner_of(extents, Axis)), divisor(extents[std::size_t(Axis)])},
                           child.shape()[std::size_t(Axis)], first};
  }
  template <class V>
  void visit(V& v) const {
    child.visit(v);
    v.op("slice", "Slice");
  }
  template <class F>
  [[nodiscard]] auto rebind(F& f) const {
    using RC = decltype(child.rebind(f));
    return sliced<Axis, RC>{child.rebind(f), first, extents};
  }
};

/// concat<Axis>(a, b) as an operand (more operands nest: concat(a, concat(b, c))).
template <int Axis, class A, class B>
struct concatenated {
  static_assert(A::rank == B::rank, "locus: internal: concat of operands of different ranks");
  static_assert(std::is_same_v<typename A::value_type, typename B::value_type>,
                "locus: internal: concat of operands of different element types");
  using locus_node = void;
  using value_type = typename A::value_type;
  static constexpr int rank = A::rank;
  static constexpr bool is_gather = true;
  static constexpr bool has_staged = has_staged_v<A> || has_staged_v<B>;
  static constexpr bool has_var = has_var_v<A> || has_var_v<B>;
  using devices = merge_t<typename A::devices, typename B::devices>;
  using operations = merge_t<typename A::operations, typename B::operations>;

  A a;
  B b;
  locus::shape<rank> extents;

  [[nodiscard]] const locus::shape<rank>& shape() const noexcept { return extents; }
  [[nodiscard]] auto kernel() const {
    using KA = std::remove_cvref_t<decltype(a.kernel())>;
    using KB = std::remove_cvref_t<decltype(b.kernel())>;
    return concat_kernel<KA, KB>{a.kernel(),
                                 b.kernel(),
                                 {divisor(detail::inner_of(extents, Axis)), divisor(extents[std::size_t(Axis)])},
                                 a.shape()[std::size_t(Axis)],
                                 b.shape()[std::size_t(Axis)]};
  }
  template <class V>
  void visit(V& v) const {
    a.visit(v);
    b.visit(v);
    v.op("concat", "ConcatV2");
  }
  template <class F>
  [[nodiscard]] auto rebind(F& f) const {
    using RA = decltype(a.rebind(f));
    using RB = decltype(b.rebind(f));
    return concatenated<Axis, RA, RB>{a.rebind(f), b.rebind(f), extents};
  }
};

namespace detail {
template <class X>
inline constexpr bool plain_operand = operand<X> && !has_var_v<node_t<X>>;

/// [first, last) of extent n, or a shape_error naming the call, the shape and the range.
template <std::integral I, std::integral J>
void check_slice(int axis, const std::string& shape, std::size_t n, I first, J last, std::size_t& a, std::size_t& b) {
  if (!locus::detail::index_in(first, n + 1, a) || !locus::detail::index_in(last, n + 1, b) || a > b)
    throw shape_error("locus: slice<" + std::to_string(axis) + ">(" + std::to_string(first) + ", " +
                      std::to_string(last) + "): not a range of axis " + std::to_string(axis) + " of shape " + shape +
                      " (0 <= first <= last <= " + std::to_string(n) + ")");
}

/// Every operand's extents equal the first's outside Axis (shape_error naming the two that differ,
/// as the caller wrote them); the joined extent and the result's size fit in size_t.
template <int Axis, class N0, class... Ns>
void check_concat(const N0& first, const Ns&... rest) {
  constexpr std::size_t R = std::size_t(N0::rank);
  std::size_t joined = first.shape()[std::size_t(Axis)];
  bool overflow = false;
  const auto one = [&](const auto& n) {
    for (std::size_t d = 0; d < R; ++d)
      if (d != std::size_t(Axis) && n.shape()[d] != first.shape()[d])
        throw shape_error("locus: concat<" + std::to_string(Axis) + ">: operands of shapes " + first.shape().str() +
                          " and " + n.shape().str() + " differ outside axis " + std::to_string(Axis));
    const std::size_t e = n.shape()[std::size_t(Axis)];
    overflow = overflow || joined > SIZE_MAX - e;
    joined += e;
  };
  (one(rest), ...);
  auto s = first.shape();
  s.extents[std::size_t(Axis)] = joined;
  if (overflow || s.size_overflows())
    locus::detail::throw_too_many_elements("concat<" + std::to_string(Axis) + ">",
                                           overflow ? "of the operands joined" : s.str(), false);
}

/// a then b along Axis (extents checked by check_concat).
template <int Axis, class A, class B>
auto concat2(A a, B b) {
  static_assert(A::rank == B::rank, "locus: concat<Axis>(a, b, ...): the operands must have the same rank");
  static_assert(std::is_same_v<typename A::value_type, typename B::value_type>,
                "locus: concat<Axis>(a, b, ...): the operands must have the same element type; convert one with "
                "locus::cast<T>(x)");
  auto s = a.shape();
  s.extents[std::size_t(Axis)] = a.shape()[std::size_t(Axis)] + b.shape()[std::size_t(Axis)];
  return concatenated<Axis, A, B>{std::move(a), std::move(b), s};
}

/// The nodes joined from the right: concat(a, concat(b, c)).
template <int Axis, class N0, class N1, class... Ns>
auto concat_nodes(N0 n0, N1 n1, Ns... ns) {
  if constexpr (sizeof...(Ns) == 0) return concat2<Axis>(std::move(n0), std::move(n1));
  else return concat2<Axis>(std::move(n0), concat_nodes<Axis>(std::move(n1), std::move(ns)...));
}
}  // namespace detail

}  // namespace locus::expr

namespace locus {

/// Indices [first, last) of axis Axis of an expression (a tensor's or view's slice of axis 0 is a
/// view: tensor/slice.hpp): an operand of the same rank, read through an index map. Throws
/// shape_error naming the shape and the range unless 0 <= first <= last <= extent(Axis).
template <int Axis, class E, std::integral I, std::integral J>
  requires(expr::detail::plain_operand<E> &&
           !(Axis == 0 && (detail::is_tensor<std::remove_cvref_t<E>>::value ||
                           detail::is_tensor_view<std::remove_cvref_t<E>>::value)))
[[nodiscard]] auto slice(E&& e, I first, J last) {
  using N = expr::node_t<E>;
  if constexpr (!(Axis >= 0 && Axis < N::rank)) {
    static_assert(Axis >= 0 && Axis < N::rank,
                  "locus: slice<Axis>(t, first, last): Axis must be 0 to the tensor's rank - 1");
    return 0;
  } else {
    auto n = expr::as_node(std::forward<E>(e));
    std::size_t a = 0, b = 0;
    expr::detail::check_slice(Axis, n.shape().str(), n.shape()[std::size_t(Axis)], first, last, a, b);
    auto s = n.shape();
    s.extents[std::size_t(Axis)] = b - a;
    return expr::sliced<Axis, N>{std::move(n), a, s};
  }
}

/// The operands side by side along axis Axis: the same rank and element type, the same extents on
/// every other axis (shape_error naming both shapes otherwise). An operand of the result's rank.
template <int Axis, class A, class B, class... Rest>
  requires(expr::detail::plain_operand<A> && expr::detail::plain_operand<B> &&
           (expr::detail::plain_operand<Rest> && ...))
[[nodiscard]] auto concat(A&& a, B&& b, Rest&&... rest) {
  using NA = expr::node_t<A>;
  if constexpr (!(Axis >= 0 && Axis < NA::rank)) {
    static_assert(Axis >= 0 && Axis < NA::rank,
                  "locus: concat<Axis>(a, b, ...): Axis must be 0 to the operands' rank - 1 (rank-0 operands have "
                  "no axis to join)");
    return 0;
  } else if constexpr (!(expr::node_t<B>::rank == NA::rank && ((expr::node_t<Rest>::rank == NA::rank) && ...))) {
    static_assert(expr::node_t<B>::rank == NA::rank && ((expr::node_t<Rest>::rank == NA::rank) && ...),
                  "locus: concat<Axis>(a, b, ...): the operands must have the same rank");
    return 0;
  } else {
    auto na = expr::as_node(std::forward<A>(a));
    auto nb = expr::as_node(std::forward<B>(b));
    auto nrest = std::make_tuple(expr::as_node(std::forward<Rest>(rest))...);
    std::apply([&](const auto&... r) { expr::detail::check_concat<Axis>(na, nb, r...); }, nrest);
    return std::apply(
        [&](auto&... r) { return expr::detail::concat_nodes<Axis>(std::move(na), std::move(nb), std::move(r)...); },
        nrest);
  }
}

}  // namespace locus
