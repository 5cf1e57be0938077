#pragma once
// Differentiable conv2d, max_pool2d, avg_pool2d and reshape (found by argument-dependent lookup
// when an operand is a var or an expression of vars, as ad::matmul is). Forward: the operation of
// ops/conv.hpp into a new var. Backward (g: the gradient of the result):
//   conv2d       dx = col2im(g W), dw = g^T im2col(x), db = g summed over batch and positions
//   max_pool2d   g to the window's first maximum (summed where windows overlap)
//   avg_pool2d   g / window size to every element of the window
//   reshape      g read in the operand's shape (the forward is a view: no copy)
// The backward kernels run below the typed surface (any_gpu inside a scope of gpu<N>), compiled
// once for every GPU.
#include <locus/ad/ops.hpp>
#include <locus/ad/var.hpp>
#include <locus/backend/registry.hpp>
#include <locus/ops/conv.hpp>
#include <locus/placement/on.hpp>
#include <locus/tensor/slice.hpp>
#include <locus/tensor/tensor.hpp>

#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

namespace locus::ad {
namespace detail {

/// f.template operator()<E>() with E the device the kernels are compiled for (any_gpu for gpu<N>,
/// inside a scope of it), and its tensors adopted back onto D.
template <device D, class F>
auto below_typed_surface(const F& f) {
  if constexpr (locus::detail::static_gpu<D>) {
    const locus::detail::checked_gpu_scope scope(id_of<D>);
    return f.template operator()<any_gpu>();
  } else {
    return f.template operator()<D>();
  }
}

/// conv_step's bias when there is none (an empty optional of this type).
struct no_bias_var {
  [[nodiscard]] bool requires_grad() const { return false; }
  [[nodiscard]] std::shared_ptr<step_base> shared_step() const { return nullptr; }
};

template <class T, device D, class X, class W, class B>
auto conv_step(const X& vx, const W& vw, const std::optional<B>& vb, const conv2d_options& o) {
  check_differentiable<T>();
  auto e = [&] {
    if constexpr (std::is_same_v<B, var<T, D, 1>>) return locus::conv2d(vx.value(), vw.value(), vb->value(), o);
    else return locus::conv2d(vx.value(), vw.value(), o);
  }();
  const auto geo = e.geometry;  // checked once, by the expression
  auto s = std::make_shared<step<T, D, 4>>();
  s->owned = on<D>(std::move(e));
  s->value = std::as_const(s->owned).view();
  s->inputs = {vx.shared_step(), vw.shared_step()};
  if (vb) s->inputs.push_back(vb->shared_step());
  s->requires_grad = vx.requires_grad() || vw.requires_grad() || (vb && vb->requires_grad());
  if (s->requires_grad) {
    s->back = [vx, vw, vb, geo](step<T, D, 4>& self) {
      const tensor_view<const T, D, 4> g = self.upstream();
      const bool want_db = vb && vb->requires_grad();
      auto r = below_typed_surface<D>([&]<device E>() {
        auto k = locus::detail::conv2d_backward_on<T, E>(vx.value().data(), vw.value().data(), g.data(), geo,
                                                         vx.requires_grad(), vw.requires_grad(), want_db);
        return locus::detail::conv_gradients<T, D>{locus::detail::adopt<D>(std::move(k.dx)), locus::detail::adopt<D>(std::move(k.dw)),
                                                   locus::detail::adopt<D>(std::move(k.db))};
      });
      if (vx.requires_grad()) vx.step()->accumulate(std::move(r.dx));
      if (vw.requires_grad()) vw.step()->accumulate(std::move(r.dw));
      if constexpr (std::is_same_v<B, var<T, D, 1>>)
        if (want_db) vb->step()->accumulate(std::move(r.db));
    };
  }
  return var<T, D, 4>(std::move(s));
}

/// conv2d's rules for nodes (ops/conv.hpp), and both vars on one device.
template <class X, class W>
void check_conv_operands() {
  locus::expr::detail::check_conv_operands<X, W>();
  static_assert(std::is_same_v<typename X::device_type, typename W::device_type>,
                "locus: conv2d(x, w): x and w live on different devices; copy one with locus::to<D>(t) first");
}

template <class Op, class X>
auto pool_step(X&& x, extent2 window, extent2 stride) {
  auto v = as_var(std::forward<X>(x));
  using V = decltype(v);
  using T = typename V::value_type;
  using D = typename V::device_type;
  static_assert(V::rank == 4, "locus: max_pool2d(x, window) and avg_pool2d(x, window): x is [N, C, H, W], rank 4");
  locus::detail::check_conv_type<T>();
  constexpr bool is_max = std::is_same_v<Op, ops::max_pool2d>;
  auto e = locus::expr::pool2d<Op>(v.value(), window, stride);
  const auto geo = e.geometry;  // checked once, by the expression
  auto s = std::make_shared<step<T, D, 4>>();
  s->owned = on<D>(std::move(e));
  s->value = std::as_const(s->owned).view();
  s->inputs = {v.shared_step()};
  s->requires_grad = v.requires_grad();
  if (s->requires_grad) {
    s->back = [v, geo](step<T, D, 4>& self) {
      const tensor_view<const T, D, 4> g = self.upstream();
      auto dx = below_typed_surface<D>([&]<device E>() {
        return locus::detail::adopt<D>(locus::detail::pool_backward_on<T, is_max, E>(v.value().data(), g.data(), geo));
      });
      v.step()->accumulate(std::move(dx));
    };
  }
  return var<T, D, 4>(std::move(s));
}

}  // namespace detail

/// conv2d(x, w, options) with x or w differentiable.
template <class X, class W>
  requires(detail::involves_var<X>() || detail::involves_var<W>())
[[nodiscard]] auto conv2d(X&& x, W&& w, const conv2d_options& o = {}) {
  auto vx = detail::as_var(std::forward<X>(x));
  auto vw = detail::as_var(std::forward<W>(w));
  detail::check_conv_operands<decltype(vx), decltype(vw)>();
  using T = typename decltype(vx)::value_type;
  using D = typename decltype(vx)::device_type;
  return detail::conv_step<T, D>(vx, vw, std::optional<detail::no_bias_var>{}, o);
}

/// conv2d(x, w, b, options) with x, w or b differentiable.
template <class X, class W, class B>
  requires((detail::involves_var<X>() || detail::involves_var<W>() || detail::involves_var<B>()) &&
           !std::is_same_v<std::remove_cvref_t<B>, conv2d_options>)
[[nodiscard]] auto conv2d(X&& x, W&& w, B&& b, const conv2d_options& o = {}) {
  auto vx = detail::as_var(std::forward<X>(x));
  auto vw = detail::as_var(std::forward<W>(w));
  auto vb = detail::as_var(std::forward<B>(b));
  detail::check_conv_operands<decltype(vx), decltype(vw)>();
  using VB = decltype(vb);
  using T = typename decltype(vx)::value_type;
  using D = typename decltype(vx)::device_type;
  static_assert(VB::rank == 1 && std::is_same_v<typename VB::value_type, T> && std::is_same_v<typename VB::device_type, D>,
                "locus: conv2d(x, w, b): b is [K], of x's element type and on x's device");
  return detail::conv_step<T, D>(vx, vw, std::optional<VB>(vb), o);
}

/// max_pool2d(x, window[, stride]) with x differentiable.
template <class X>
  requires(detail::involves_var<X>())
[[nodiscard]] auto max_pool2d(X&& x, extent2 window) {
  return detail::pool_step<ops::max_pool2d>(std::forward<X>(x), window, window);
}
template <class X>
  requires(detail::involves_var<X>())
[[nodiscard]] auto max_pool2d(X&& x, extent2 window, extent2 stride) {
  return detail::pool_step<ops::max_pool2d>(std::forward<X>(x), window, stride);
}
/// avg_pool2d(x, window[, stride]) with x differentiable.
template <class X>
  requires(detail::involves_var<X>())
[[nodiscard]] auto avg_pool2d(X&& x, extent2 window) {
  return detail::pool_step<ops::avg_pool2d>(std::forward<X>(x), window, window);
}
template <class X>
  requires(detail::involves_var<X>())
[[nodiscard]] auto avg_pool2d(X&& x, extent2 window, extent2 stride) {
  return detail::pool_step<ops::avg_pool2d>(std::forward<X>(x), window, stride);
}

/// reshape(x, s) of a var or an expression of vars: the same elements in shape s, no copy.
template <class X, int R>
  requires(detail::involves_var<X>() && !detail::is_transposed_v<std::remove_cvref_t<X>>)
[[nodiscard]] auto reshape(X&& x, shape<R> s) {
  auto v = detail::as_var(std::forward<X>(x));
  using V = decltype(v);
  using T = typename V::value_type;
  using D = typename V::device_type;
  detail::check_differentiable<T>();
  auto st = std::make_shared<detail::step<T, D, R>>();
  st->value = locus::reshape(v.value(), s);  // throws on a size mismatch; the input step keeps it alive
  st->inputs = {v.shared_step()};
  st->requires_grad = v.requires_grad();
  if (st->requires_grad) {
    st->back = [v](detail::step<T, D, R>& self) {
      const tensor_view<const T, D, R> g = self.upstream();
      v.step()->accumulate(on<D>(expr::copy(locus::reshape(g, v.value().shape()))));
    };
  }
  return var<T, D, R>(std::move(st));
}

}  // namespace locus::ad
