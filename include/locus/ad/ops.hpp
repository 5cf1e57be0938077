#pragma once
// The differentiable steps that are not elementwise: matmul and transpose, sum and mean (whole or
// along an axis), softmax_cross_entropy. They take vars, expressions of vars, or constants (tensors,
// views, expressions without vars), and are found by argument-dependent lookup: `matmul(x, W)` with
// W a var is ad::matmul; with plain tensors it is locus::matmul.
//
// Backward, per step (g: the gradient of the result):
//   C = matmul(A, B)       dA = g B^T, dB = A^T g (transposed operands accordingly); two products
//   s = sum<Axis>(e)       g broadcast back over e, fused into e's backward kernels (no tensor of it)
//   l = softmax_cross_entropy(z, y)   dz = g (softmax(z) - one_hot(y)) / rows, kept from the forward
#include <locus/ad/var.hpp>
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/expr/gather.hpp>
#include <locus/expr/node.hpp>
#include <locus/ops/matmul.hpp>
#include <locus/ops/nn.hpp>
#include <locus/ops/reduce.hpp>
#include <locus/placement/on.hpp>
#include <locus/tensor/tensor.hpp>

#include <concepts>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace locus::ad {

/// transpose(v) of a var (or an expression of vars, evaluated first), for ad::matmul.
template <class V>
struct transposed {
  static constexpr bool has_var = true;  // keeps locus::matmul out of the overload set
  V v;
};

namespace detail {
template <class X>
inline constexpr bool is_transposed_v = false;
template <class V>
inline constexpr bool is_transposed_v<transposed<V>> = true;

/// Whether X takes part in differentiation: a var, an expression of vars, transpose of one.
template <class X>
constexpr bool involves_var() {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_transposed_v<V>) return true;
  else if constexpr (expr::operand<X>) return expr::has_var_v<expr::node_t<X>>;
  else return false;
}

/// Any operand as a var: a var itself, an expression of vars evaluated (differentiable), and a
/// constant (tensor, view, expression without vars) as a var that needs no gradient: a view of
/// an lvalue tensor (no copy), the value of anything else.
template <class X>
auto as_var(X&& x) {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_var_v<V>) {
    return V(x);
  } else if constexpr (expr::has_var_v<expr::node_t<X>>) {
    return evaluate(std::forward<X>(x));
  } else {
    auto n = expr::as_node(std::forward<X>(x));
    using N = decltype(n);
    using T = typename N::value_type;
    using D = device_of_t<N>;
    auto s = std::make_shared<step<T, D, N::rank>>();
    // A view of the operand, kept valid while the step lives (see "Lifetimes" in ad/var.hpp).
    if constexpr (locus::detail::is_tensor<V>::value && std::is_lvalue_reference_v<X>) {
      s->value = kept_view(std::as_const(x).view(), *s);
    } else if constexpr (locus::detail::is_tensor_view<V>::value) {
      s->value = kept_view(tensor_view<const T, D, N::rank>(x), *s);
    } else {
      s->owned = on<D>(n);
      s->value = std::as_const(s->owned).view();
    }
    return var<T, D, N::rank>(std::move(s));
  }
}

template <class X>
auto matmul_side(X&& x) {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_transposed_v<V>) return std::pair{x.v, true};
  else return std::pair{as_var(std::forward<X>(x)), false};
}

/// on<D>(matmul(op(a), op(b))) for views a, b and transposition flags known at run time.
template <class T, device D>
tensor<T, D, 2> product(const tensor_view<const T, D, 2>& a, bool ta, const tensor_view<const T, D, 2>& b, bool tb) {
  if (ta && tb) return on<D>(locus::matmul(locus::transpose(a), locus::transpose(b)));
  if (ta) return on<D>(locus::matmul(locus::transpose(a), b));
  if (tb) return on<D>(locus::matmul(a, locus::transpose(b)));
  return on<D>(locus::matmul(a, b));
}

/// The reduction step behind sum and mean: forward one fused reduction over e, backward e's
/// kernels with the gradient broadcast back (times `scale`: 1/count for a mean).
template <class Family, int Axis, class N>
auto reduce_step(N n, bool is_mean) {
  check_differentiable<typename N::value_type>();
  using D = device_of_t<N>;
  using Red = expr::reduction<Family, Axis, N>;
  using T = typename Red::value_type;  // a sum or mean of 16-bit values accumulates in float and is float
  constexpr int R = Red::rank;
  auto s = std::make_shared<step<T, D, R>>();
  s->owned = on<D>(Red{n});
  s->value = std::as_const(s->owned).view();
  auto collect = [&](const auto& v, spread) {
    s->inputs.push_back(v.shared_step());
    s->requires_grad = s->requires_grad || v.requires_grad();
  };
  for_each_var(n, collect, spread::same);
  if (s->requires_grad) {
    std::size_t count = n.shape().size();
    if constexpr (Axis == 0) count = n.shape()[0];
    else if constexpr (Axis == 1) count = n.shape()[1];
    const T scale = is_mean && count != 0 ? T(1) / static_cast<T>(count) : T(1);
    s->back = [n = keep(n, *s), scale](step<T, D, R>& self) {
      const expr::leaf<T, D, R> g{self.upstream()};
      const auto scaled = [&](auto up) {
        return expr::node<ops::mul, decltype(up), expr::scalar<T>>(ops::mul{}, up, expr::scalar<T>{scale});
      };
      if constexpr (Axis == all_axes || Axis == 0) push_gradients<D>(n, scaled(g));  // rank 0, or a row
      else push_gradients<D>(n, expr::column<decltype(scaled(g))>{scaled(g)});    // one value per row
    };
  }
  return var<T, D, R>(std::move(s));
}
}  // namespace detail

/// transpose(v): v (a var or an expression of vars) read transposed by ad::matmul.
template <class X>
  requires(detail::involves_var<X>() && !detail::is_transposed_v<std::remove_cvref_t<X>>)
[[nodiscard]] auto transpose(X&& x) {
  auto v = detail::as_var(std::forward<X>(x));
  static_assert(decltype(v)::rank == 2, "locus: transpose(x) takes a rank-2 operand");
  return transposed<decltype(v)>{std::move(v)};
}

namespace detail {
/// ad::matmul's step over two vars of one element type and device.
template <class VA, class VB>
auto matmul_step(const VA& va, bool ta, const VB& vb, bool tb) {
  using T = typename VA::value_type;
  using D = typename VA::device_type;
  check_differentiable<T>();
  auto s = std::make_shared<step<T, D, 2>>();
  s->owned = product(va.value(), ta, vb.value(), tb);
  s->value = std::as_const(s->owned).view();
  s->inputs = {va.shared_step(), vb.shared_step()};
  s->requires_grad = va.requires_grad() || vb.requires_grad();
  if (s->requires_grad) {
    s->back = [va = va, ta = ta, vb = vb, tb = tb](step<T, D, 2>& self) {
      const tensor_view<const T, D, 2> g = self.upstream();
      // C = op(A) op(B): d op(A) = g op(B)^T, d op(B) = op(A)^T g; a transposed operand's gradient
      // is the transpose of that, written directly by swapping the product's operands.
      if (va.requires_grad()) {
        auto da = ta ? product(vb.value(), tb, g, true) : product(g, false, vb.value(), !tb);
        va.step()->accumulate(std::move(da));
      }
      if (vb.requires_grad()) {
        auto db = tb ? product(g, true, va.value(), ta) : product(va.value(), !ta, g, false);
        vb.step()->accumulate(std::move(db));
      }
    };
  }
  return var<T, D, 2>(std::move(s));
}
}  // namespace detail

/// The matrix product of two rank-2 operands, at least one of them differentiable.
template <class A, class B>
  requires(detail::involves_var<A>() || detail::involves_var<B>())
[[nodiscard]] auto matmul(A&& a, B&& b) {
  auto [va, ta] = detail::matmul_side(std::forward<A>(a));
  auto [vb, tb] = detail::matmul_side(std::forward<B>(b));
  using VA = decltype(va);
  using VB = decltype(vb);
  static_assert(VA::rank == 2 && VB::rank == 2, "locus: matmul(A, B) takes rank-2 operands");
  static_assert(std::is_same_v<typename VA::value_type, typename VB::value_type>,
                "locus: matmul(A, B): A and B must have the same element type: cast one, matmul(cast<float>(a), b) "
                "or matmul(a, cast<bfloat16>(b))");
  static_assert(std::is_same_v<typename VA::device_type, typename VB::device_type>,
                "locus: matmul(A, B): A and B live on different devices; copy one with locus::to<D>(x) first");
  if constexpr (!std::is_same_v<typename VA::value_type, typename VB::value_type> ||
                !std::is_same_v<typename VA::device_type, typename VB::device_type>) {
    return va;  // refused above: no cascade of errors below
  } else {
    return detail::matmul_step(va, ta, vb, tb);
  }
}

/// sum<Axis>(e) of an expression of vars: one fused reduction forward; backward, the gradient
/// rides in e's own backward kernels.
template <int Axis = all_axes, class E>
  requires(expr::operand<E> && expr::has_var_v<expr::node_t<E>>)
[[nodiscard]] auto sum(E&& e) {
  return detail::reduce_step<reducers::sum, Axis>(expr::as_node(std::forward<E>(e)), false);
}
/// mean<Axis>(e) of an expression of vars.
template <int Axis = all_axes, class E>
  requires(expr::operand<E> && expr::has_var_v<expr::node_t<E>>)
[[nodiscard]] auto mean(E&& e) {
  return detail::reduce_step<reducers::mean, Axis>(expr::as_node(std::forward<E>(e)), true);
}

/// The mean softmax cross-entropy of logits z [rows, classes] (a var or an expression of vars)
/// against integer labels: one kernel over the rows computes the loss and keeps its gradient.
template <class E, class L, device D>
  requires(expr::operand<E> && expr::has_var_v<expr::node_t<E>>)
[[nodiscard]] auto softmax_cross_entropy(E&& logits, const tensor<L, D, 1>& labels) {
  auto z = evaluate(std::forward<E>(logits));
  using Z = decltype(z);
  using T = typename Z::value_type;
  static_assert(Z::rank == 2, "locus: softmax_cross_entropy takes logits of rank 2 [rows, classes]");
  static_assert(std::is_floating_point_v<T>,
                "locus: softmax_cross_entropy takes float or double logits: cast 16-bit ones first, "
                "softmax_cross_entropy(cast<float>(logits), labels)");
  static_assert(std::is_same_v<typename Z::device_type, D>,
                "locus: softmax_cross_entropy: the labels live on another device than the logits; copy them "
                "with locus::to<D>(labels) first");
  if constexpr (!std::is_floating_point_v<T>) {
    return softmax_cross_entropy(cast<float>(z), labels);  // refused above: no second message
  } else {
    const tensor<T, D, 2>* zt = &z.step()->owned;
    tensor<T, D, 2> copy;
    if (zt->data() != z.value().data()) {  // a parameter (a view): the kernel takes a tensor
      copy = on<D>(expr::copy(z.value()));
      zt = &copy;
    }
    auto r = locus::softmax_cross_entropy(*zt, labels);
    auto s = std::make_shared<detail::step<T, D, 0>>();
    s->owned = std::move(r.loss);
    s->value = std::as_const(s->owned).view();
    s->inputs = {z.shared_step()};
    s->requires_grad = z.requires_grad();
    if (s->requires_grad) {
      auto dz = std::make_shared<tensor<T, D, 2>>(std::move(r.gradient));
      s->back = [z, dz](detail::step<T, D, 0>& self) {
        // The kept gradient is handed on (moved) by the first backward through this loss.
        if (!(dz->shape() == z.value().shape()))
          throw shape_error("locus: ad: backward through softmax_cross_entropy a second time: its kept gradient "
                            "was handed on by the first; compute the loss again");
        if (self.grad_is_one) {
          z.step()->accumulate(std::move(*dz));  // d loss / d loss is 1: the kept gradient as it is
          self.spent = "locus: ad: backward through softmax_cross_entropy a second time: its kept gradient was "
                       "handed on by the first; compute the loss again";
        } else {
          z.step()->accumulate(on<D>(*dz * self.upstream()));
        }
      };
    }
    return var<T, D, 0>(std::move(s));
  }
}

/// slice<Axis>(x, first, last) of a var or an expression of vars (found by argument-dependent
/// lookup, as matmul is): forward the slice into a new var; backward, the gradient put back in its
/// window of x's shape, zeros around it (one concat kernel). Bad ranges throw as locus::slice does.
template <int Axis, class X, std::integral I, std::integral J>
  requires(detail::involves_var<X>() && !detail::is_transposed_v<std::remove_cvref_t<X>>)
[[nodiscard]] auto slice(X&& x, I first, J last) {
  auto v = detail::as_var(std::forward<X>(x));
  using V = decltype(v);
  using T = typename V::value_type;
  using D = typename V::device_type;
  constexpr int R = V::rank;
  static_assert(Axis >= 0 && Axis < R, "locus: slice<Axis>(t, first, last): Axis must be 0 to the tensor's rank - 1");
  detail::check_differentiable<T>();
  const tensor_view<const T, D, R> in = v.value();
  const std::size_t n = in.shape()[std::size_t(Axis)];
  std::size_t a = 0, b = 0;
  expr::detail::check_slice(Axis, in.shape().str(), n, first, last, a, b);
  auto s = std::make_shared<detail::step<T, D, R>>();
  s->owned = on<D>(locus::slice<Axis>(in, a, b));
  s->value = std::as_const(s->owned).view();
  s->inputs = {v.shared_step()};
  s->requires_grad = v.requires_grad();
  if (s->requires_grad) {
    s->back = [v, a, b, n](detail::step<T, D, R>& self) {
      const tensor_view<const T, D, R> g = self.upstream();
      auto around = [&](std::size_t extent) {
        auto sh = v.value().shape();
        sh.extents[std::size_t(Axis)] = extent;
        return tensor<T, D, R>(sh, T(0));
      };
      tensor<T, D, R> dx;
      if (a > 0 && b < n) dx = locus::concat<Axis>(around(a), g, around(n - b));
      else if (a > 0) dx = locus::concat<Axis>(around(a), g);
      else if (b < n) dx = locus::concat<Axis>(g, around(n - b));
      else dx = on<D>(expr::copy(g));
      v.step()->accumulate(std::move(dx));
    };
  }
  return var<T, D, R>(std::move(s));
}

/// concat<Axis>(a, b, ...) with at least one var or expression of vars (found by argument-dependent
/// lookup): forward one concat into a new var; backward, each operand's window of the gradient.
template <int Axis, class A, class B, class... Rest>
  requires(detail::involves_var<A>() || detail::involves_var<B>() || (detail::involves_var<Rest>() || ...))
[[nodiscard]] auto concat(A&& a, B&& b, Rest&&... rest) {
  auto vars = std::make_tuple(detail::as_var(std::forward<A>(a)), detail::as_var(std::forward<B>(b)),
                              detail::as_var(std::forward<Rest>(rest))...);
  using V = std::tuple_element_t<0, decltype(vars)>;
  using T = typename V::value_type;
  using D = typename V::device_type;
  constexpr int R = V::rank;
  static_assert(Axis >= 0 && Axis < R,
                "locus: concat<Axis>(a, b, ...): Axis must be 0 to the operands' rank - 1 (rank-0 operands have no "
                "axis to join)");
  detail::check_differentiable<T>();
  auto s = std::make_shared<detail::step<T, D, R>>();
  s->owned = std::apply([](const auto&... v) { return tensor<T, D, R>(locus::concat<Axis>(v.value()...)); }, vars);
  s->value = std::as_const(s->owned).view();
  std::apply(
      [&](const auto&... v) {
        s->inputs = {v.shared_step()...};
        s->requires_grad = (v.requires_grad() || ...);
      },
      vars);
  if (s->requires_grad) {
    s->back = [vars](detail::step<T, D, R>& self) {
      const tensor_view<const T, D, R> g = self.upstream();
      std::size_t offset = 0;
      std::apply(
          [&](const auto&... v) {
            const auto one = [&](const auto& x) {
              const std::size_t n = x.value().shape()[std::size_t(Axis)];
              if (x.requires_grad()) {
                tensor<T, D, R> part = on<D>(expr::copy(locus::slice<Axis>(g, offset, offset + n)));
                x.step()->accumulate(std::move(part));
              }
              offset += n;
            };
            (one(v), ...);
          },
          vars);
    };
  }
  return var<T, D, R>(std::move(s));
}

}  // namespace locus::ad
