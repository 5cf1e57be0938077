#pragma once
// Gradients of a function written forward only:
//
//   auto loss_fn = [](auto& p, const auto& x, const auto& y) {
//     auto& [W1, b1, W2, b2] = p;
//     return softmax_cross_entropy(matmul(relu(matmul(x, W1) + b1), W2) + b2, y);
//   };
//   auto [loss, g] = ad::value_and_grad(loss_fn, std::tie(W1, b1, W2, b2), x, y);
//   // g: std::tuple<tensor<float, D, 2>, tensor<float, D, 1>, ...>, each on its parameter's device
//   auto g1 = ad::grad(loss_fn1, W, x, y);   // one tensor: its gradient, a tensor of W's type
//
// f is called with the parameters as vars (a std::tuple of vars for a tuple of tensors, one var
// for one tensor) followed by the other arguments unchanged; it returns the loss: a rank-0 var or
// expression of vars. Nothing is kept between calls; two threads may differentiate at once.
#include <locus/ad/ops.hpp>
#include <locus/ad/var.hpp>
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/expr/operators.hpp>
#include <locus/tensor/tensor.hpp>

#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace locus::ad {

template <class T, device D, class G>
struct value_and_gradient {
  tensor<T, D, 0> loss;  ///< the function's value
  G grad;                ///< the gradients, shaped like the parameters
};

namespace detail {
template <class X>
inline constexpr bool is_tuple_v = false;
template <class... Xs>
inline constexpr bool is_tuple_v<std::tuple<Xs...>> = true;

template <class P>
auto make_parameters(const P& p) {
  if constexpr (is_tuple_v<P>) {
    return std::apply([](const auto&... x) { return std::make_tuple(make_parameters(x)...); }, p);
  } else {
    static_assert(locus::detail::is_tensor<P>::value || locus::detail::is_tensor_view<P>::value,
                  "locus: ad::grad: the parameters are a tensor, a tensor view, or a std::tuple of them "
                  "(std::tie(W, b))");
    return parameter(p);
  }
}
/// The parameters as vars that need no gradient (views of them: no copy, no graph kept).
template <class P>
auto make_constants(const P& p) {
  if constexpr (is_tuple_v<P>) return std::apply([](const auto&... x) { return std::make_tuple(make_constants(x)...); }, p);
  else return as_var(p);
}
template <class V>
auto take_gradients(V& v) {
  if constexpr (is_tuple_v<V>) return std::apply([](auto&... x) { return std::make_tuple(take_gradients(x)...); }, v);
  else return v.take_grad();
}
}  // namespace detail

/// The value of f(params-as-vars, args...) and its gradient with respect to every parameter.
template <class F, class P, class... Args>
[[nodiscard]] auto value_and_grad(F&& f, const P& params, Args&&... args) {
  auto vars = detail::make_parameters(params);
  auto out = std::invoke(std::forward<F>(f), vars, std::forward<Args>(args)...);
  using O = decltype(out);
  static_assert(expr::operand<O> && expr::has_var_v<expr::node_t<O>>,
                "locus: ad::grad: the function must return its loss computed from the parameters it is given "
                "(a rank-0 ad::var or expression of them)");
  auto loss = evaluate(std::move(out));
  using L = decltype(loss);
  static_assert(L::rank == 0, "locus: ad::grad: the loss must be rank 0 (a scalar: sum or mean it)");
  using T = typename L::value_type;
  using D = typename L::device_type;
  backward(loss);
  tensor<T, D, 0> value = loss.step()->owned.data() == loss.value().data() ? std::move(loss.step()->owned)
                                                                           : tensor<T, D, 0>(on<D>(expr::copy(loss.value())));
  auto grads = detail::take_gradients(vars);
  return value_and_gradient<T, D, decltype(grads)>{std::move(value), std::move(grads)};
}

/// The value of f(params-as-vars, args...) alone: the same function as value_and_grad's, its vars
/// constants (no gradient kept, no backward pass).
template <class F, class P, class... Args>
[[nodiscard]] auto value_of(F&& f, const P& params, Args&&... args) {
  auto vars = detail::make_constants(params);
  auto out = evaluate(std::invoke(std::forward<F>(f), vars, std::forward<Args>(args)...));
  using L = decltype(out);
  static_assert(L::rank == 0, "locus: ad::value_of: the function must return a rank-0 value (a scalar: sum or mean it)");
  using T = typename L::value_type;
  using D = typename L::device_type;
  return tensor<T, D, 0>(on<D>(expr::copy(out.value())));
}

/// The gradient of f(params-as-vars, args...) with respect to every parameter.
template <class F, class P, class... Args>
[[nodiscard]] auto grad(F&& f, const P& params, Args&&... args) {
  return value_and_grad(std::forward<F>(f), params, std::forward<Args>(args)...).grad;
}

}  // namespace locus::ad
