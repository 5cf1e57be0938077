#pragma once
// Models written forward only, trained by the policies of data_parallel (both meet model_on<M, D>
// for every device; the gradients come from locus::ad):
//
//   namespace nn = locus::train::nn;
//   train::sequential model{nn::dense(784, 128), nn::relu, nn::dense(128, 64), nn::relu, nn::dense(64, 10)};
//
//   train::functional model{train::parameters{nn::glorot(784, 128), nn::zeros(128), nn::glorot(128, 10), nn::zeros(10)},
//                           [](const auto& p, const auto& x) {
//                             const auto& [W1, b1, W2, b2] = p;
//                             return matmul(relu(matmul(x, W1) + b1), W2) + b2;  // the logits
//                           }};
//
// Both are classifiers: the forward pass gives logits [batch, classes], the loss is their mean
// softmax cross-entropy against the labels, predict() their row-wise argmax. The forward function
// is called with the parameters as ad::vars when training and as tensors when predicting, so it
// must be generic (auto parameters). Layers:
//   nn::dense(in, out)     x W + b: W [in, out] Glorot-uniform, b [out] zeros
//   nn::relu, nn::tanh, nn::sigmoid
//   nn::conv2d(in, out, kernel, options)   conv2d(x, W, b, options): W [out, in, kh, kw] Glorot-uniform
//                          (fans in * kh * kw and out * kh * kw), b [out] zeros; x [batch, in, H, W]
//   nn::max_pool2d(window[, stride]), nn::avg_pool2d(window[, stride])
//   nn::reshape(shape{C, H, W})   rows [batch, C*H*W] as images [batch, C, H, W] (no copy)
//   nn::flatten            images [batch, C, H, W] as rows [batch, C*H*W] (no copy)
//   nn::dropout(rate)      training only: each element kept with probability 1 - rate and scaled
//                          by 1 / (1 - rate); the mask is counter-based (random.hpp): call k of
//                          loss_and_grad uses the stream (seed, k), layer l its site l of it
//                          (pass::site); in a functional forward, nn::dropout(rate)(h, s.site(k))
// Initial values come from counter-based generators: the same numbers on every device. The model's
// seed (constructor's last argument, 1 by default) picks them: layer l with parameters (counting
// dense and conv2d layers only) uses seed * 1000 + l, as train::mlp does, so the two start from the
// same weights. sequential follows the per-example shape through its layers when it is built (a
// convolution needs nn::reshape(shape{C, H, W}) before it) and names the layer whose input does
// not fit.
#include <locus/ad/ad.hpp>
#include <locus/config.hpp>
#include <locus/data/idx.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/ops/conv.hpp>
#include <locus/ops/random.hpp>
#include <locus/ops/reduce.hpp>
#include <locus/placement/on.hpp>
#include <locus/tensor/tensor.hpp>

#include <atomic>
#include <concepts>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace locus::train {

/// What a layer's forward pass knows: training (dropout on) or predicting, and the pass's stream.
struct pass {
  bool training = false;
  std::uint64_t stream = 0;
  /// The same pass for random site k of a forward function: two dropouts of one pass given
  /// different sites draw independent masks (with one site, equal shapes would share a mask).
  /// sequential gives layer k site k.
  [[nodiscard]] constexpr pass site(std::uint64_t k) const noexcept {
    std::uint64_t z = stream + (k + 1) * 0x9E3779B97F4A7C15ull;  // splitmix64's finaliser
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return {training, z ^ (z >> 31)};
  }
};

/// A model's parameters on device D, held as a (nested) std::tuple of tensors: for_each visits each
/// tensor's view depth-first, in the tuple's order.
template <class Tuple>
struct parameter_tuple {
  Tuple tensors;

  template <class F>
  void for_each(F&& f) {
    visit(tensors, f);
  }
  template <class F>
  void for_each(F&& f) const {
    visit(tensors, f);
  }

private:
  template <class X, class F>
  static void visit(X& x, F& f) {
    if constexpr (ad::detail::is_tuple_v<std::remove_const_t<X>>) std::apply([&](auto&... e) { (visit(e, f), ...); }, x);
    else f(x.view());
  }
};

/// The operations the layers call, found by ordinary lookup (locus's) and argument-dependent lookup
/// (locus::ad's, for variables): inside namespace nn the layer types would hide them.
namespace layer_ops {
using locus::avg_pool2d;
using locus::conv2d;
using locus::max_pool2d;
using locus::reshape;
template <class X>
using element_of = typename expr::node_t<X>::value_type;
/// A convolution of 16-bit values (a mixed-precision model's) runs in float, as there are no 16-bit
/// convolution kernels: its operands widened, the result rounded back to their type.
template <class X, class W, class B>
auto conv(X&& x, W&& w, B&& b, const conv2d_options& o) {
  using T = element_of<X>;
  if constexpr (is_half_float_v<T>)
    return cast<T>(conv2d(cast<float>(std::forward<X>(x)), cast<float>(std::forward<W>(w)),
                          cast<float>(std::forward<B>(b)), o));
  else return conv2d(std::forward<X>(x), std::forward<W>(w), std::forward<B>(b), o);
}
template <bool Max, class X>
auto pool(X&& x, extent2 window, extent2 stride) {
  using T = element_of<X>;
  if constexpr (is_half_float_v<T>) return cast<T>(pool<Max>(cast<float>(std::forward<X>(x)), window, stride));
  else if constexpr (Max) return max_pool2d(std::forward<X>(x), window, stride);
  else return avg_pool2d(std::forward<X>(x), window, stride);
}
template <class X, int R>
auto reshaped(X&& x, shape<R> s) {
  return reshape(std::forward<X>(x), s);
}
}  // namespace layer_ops

namespace nn {

/// x W + b.
struct dense {
  std::size_t in = 0, out = 0;
  dense(std::size_t in_, std::size_t out_) : in(in_), out(out_) {
    if (in == 0 || out == 0)
      throw shape_error("locus: nn::dense(" + std::to_string(in) + ", " + std::to_string(out) + "): a layer of size 0");
  }
  template <device D>
  using params = std::tuple<tensor<float, D, 2>, tensor<float, D, 1>>;
  template <device D>
  [[nodiscard]] params<D> init(std::uint64_t seed) const {
    return {on<D>(random::glorot_uniform<float>(shape{in, out}, seed)), tensor<float, D, 1>(shape{out}, 0.f)};
  }
  template <class X, class P>
  [[nodiscard]] auto operator()(X&& x, const P& p, const pass&) const {
    return matmul(std::forward<X>(x), std::get<0>(p)) + std::get<1>(p);
  }
};

/// What a layer without parameters has for them: nothing.
struct no_parameters {
  template <device D>
  using params = std::tuple<>;
  template <device D>
  [[nodiscard]] params<D> init(std::uint64_t) const {
    return {};
  }
};

/// conv2d(x, W, b, options) over images [batch, in, H, W]; see the top of this file.
struct conv2d {
  std::size_t in = 0, out = 0;
  extent2 kernel;
  conv2d_options options;
  conv2d(std::size_t in_, std::size_t out_, extent2 kernel_, conv2d_options o = {})
      : in(in_), out(out_), kernel(kernel_), options(o) {
    if (in == 0 || out == 0)
      throw shape_error("locus: nn::conv2d(" + std::to_string(in) + ", " + std::to_string(out) + ", " + kernel.str() +
                        "): a layer of 0 channels");
    locus::detail::check_extent_option("nn::conv2d", "kernel", kernel, 1);
    locus::detail::check_conv_options("nn::conv2d", o);
  }
  [[nodiscard]] locus::shape<4> weight_shape() const {
    return {out, in, std::size_t(kernel.h), std::size_t(kernel.w)};
  }
  [[nodiscard]] std::string str() const {
    return "conv2d(" + std::to_string(in) + ", " + std::to_string(out) + ", " + kernel.str() + ")";
  }
  template <device D>
  using params = std::tuple<tensor<float, D, 4>, tensor<float, D, 1>>;
  template <device D>
  [[nodiscard]] params<D> init(std::uint64_t seed) const {
    const double fans = double(in + out) * double(kernel.h * kernel.w);
    const double limit = std::sqrt(6.0 / fans);
    return {on<D>(random::uniform<float>(weight_shape(), seed, -limit, limit)), tensor<float, D, 1>(shape{out}, 0.f)};
  }
  template <class X, class P>
  [[nodiscard]] auto operator()(X&& x, const P& p, const pass&) const {
    return layer_ops::conv(std::forward<X>(x), std::get<0>(p), std::get<1>(p), options);
  }
};

/// max_pool2d / avg_pool2d of images: window (and stride: the window by default), no padding.
template <bool Max>
struct pool2d : no_parameters {
  extent2 window, stride;
  explicit pool2d(extent2 w) : pool2d(w, w) {}
  pool2d(extent2 w, extent2 s) : window(w), stride(s) {
    locus::detail::check_extent_option(name(), "window", window, 1);
    locus::detail::check_extent_option(name(), "stride", stride, 1);
  }
  static constexpr const char* name() { return Max ? "nn::max_pool2d" : "nn::avg_pool2d"; }
  [[nodiscard]] std::string str() const {
    return std::string(Max ? "max_pool2d(" : "avg_pool2d(") + window.str() + ", stride " + stride.str() + ")";
  }
  template <class X, class P>
  [[nodiscard]] auto operator()(X&& x, const P&, const pass&) const {
    return layer_ops::pool<Max>(std::forward<X>(x), window, stride);
  }
};
using max_pool2d = pool2d<true>;
using avg_pool2d = pool2d<false>;

/// Rows [batch, F] read as [batch, s...] (s: the shape of one example, {C, H, W} for images).
template <int R>
struct reshape : no_parameters {
  static_assert(R == 1 || R == 3, "locus: nn::reshape(shape{...}): one example's shape, {C, H, W} (images) or {F}");
  static constexpr int rank = R;
  locus::shape<R> example;
  explicit reshape(locus::shape<R> s) : example(s) {
    if (s.size_overflows() || s.size() == 0)
      throw shape_error("locus: nn::reshape(" + s.str() + "): an example of 0 elements");
  }
  template <class X, class P>
  [[nodiscard]] auto operator()(X&& x, const P&, const pass&) const {
    locus::shape<R + 1> s;
    s.extents[0] = x.shape()[0];
    for (int i = 0; i < R; ++i) s.extents[std::size_t(i) + 1] = example[std::size_t(i)];
    return layer_ops::reshaped(std::forward<X>(x), s);
  }
};
template <int R>
reshape(locus::shape<R>) -> reshape<R>;

/// Images [batch, C, H, W] (or any [batch, ...]) read as rows [batch, C*H*W].
struct flatten_layer : no_parameters {
  template <class X, class P>
  [[nodiscard]] auto operator()(X&& x, const P&, const pass&) const {
    using V = std::remove_cvref_t<X>;
    const auto s = x.shape();
    std::size_t features = 1;
    for (int i = 1; i < V::rank; ++i) features *= s[std::size_t(i)];
    return layer_ops::reshaped(std::forward<X>(x), shape{s[0], features});
  }
};
inline constexpr flatten_layer flatten{};

/// A layer without parameters: an elementwise function.
template <class F>
struct activation : no_parameters {
  F f;
  template <class X, class P>
  [[nodiscard]] auto operator()(X&& x, const P&, const pass&) const {
    return f(std::forward<X>(x));
  }
};
struct relu_fn {
  template <class X>
  auto operator()(X&& x) const {
    return locus::relu(std::forward<X>(x));
  }
};
struct tanh_fn {
  template <class X>
  auto operator()(X&& x) const {
    return locus::tanh(std::forward<X>(x));
  }
};
struct sigmoid_fn {
  template <class X>
  auto operator()(X&& x) const {
    return locus::sigmoid(std::forward<X>(x));
  }
};
inline constexpr activation<relu_fn> relu{};
inline constexpr activation<tanh_fn> tanh{};
inline constexpr activation<sigmoid_fn> sigmoid{};

/// Training: each element kept with probability 1 - rate, scaled by 1 / (1 - rate). Predicting:
/// the identity.
struct dropout : no_parameters {
  double rate = 0.5;
  explicit dropout(double r) : rate(r) {
    if (!(r >= 0.0 && r < 1.0))
      throw config_error("locus: nn::dropout(" + std::to_string(r) + "): the rate must lie in [0, 1)");
  }
  template <class X, class P>
  [[nodiscard]] auto operator()(X&& x, const P&, const pass& c) const {
    return (*this)(std::forward<X>(x), c);
  }
  /// As a function inside a functional model's forward: `nn::dropout(0.2)(h, s.site(1))`.
  template <class X>
  [[nodiscard]] auto operator()(X&& x, const pass& c) const {
    auto n = expr::as_node(std::forward<X>(x));
    const float keep = static_cast<float>(1.0 - rate);
    const auto mask = random::uniform<float>(n.shape(), c.stream);
    // Not training: a mask of ones (rate 0 everywhere), the same expression type either way.
    const float threshold = c.training ? keep : 2.f;
    const float scale = c.training ? 1.f / keep : 1.f;
    if constexpr (is_half_float_v<typename decltype(n)::value_type>)
      return where(mask < threshold, n * scale, n * 0.f);  // the scale stays float (1/0.9 unrounded)
    else return std::move(n) * where(mask < threshold, scale, 0.f);
  }
};

/// Initial values for train::parameters: glorot(in, out) a [in, out] Glorot-uniform matrix,
/// zeros(n...) a tensor of zeros, normal(stddev, n...) Gaussian values.
struct glorot {
  static constexpr int rank = 2;
  std::size_t in, out;
  glorot(std::size_t i, std::size_t o) : in(i), out(o) {}
  template <device D>
  [[nodiscard]] tensor<float, D, 2> make(std::uint64_t seed) const {
    return on<D>(random::glorot_uniform<float>(shape{in, out}, seed));
  }
};
template <int R>
struct zeros {
  static constexpr int rank = R;
  locus::shape<R> extents;
  template <std::integral... N>
  explicit zeros(N... n) : extents{static_cast<std::size_t>(n)...} {}
  template <device D>
  [[nodiscard]] tensor<float, D, R> make(std::uint64_t) const {
    return tensor<float, D, R>(extents, 0.f);
  }
};
template <class... N>
zeros(N...) -> zeros<int(sizeof...(N))>;
template <int R>
struct normal {
  static constexpr int rank = R;
  double stddev;
  locus::shape<R> extents;
  template <std::integral... N>
  explicit normal(double s, N... n) : stddev(s), extents{static_cast<std::size_t>(n)...} {}
  template <device D>
  [[nodiscard]] tensor<float, D, R> make(std::uint64_t seed) const {
    return on<D>(random::normal<float>(extents, seed, 0.0, stddev));
  }
};
template <class... N>
normal(double, N...) -> normal<int(sizeof...(N))>;

}  // namespace nn

namespace detail {
/// loss(params-as-vars) and its gradient, as the model interface wants them.
template <class Params, class LossOfVars>
auto model_loss_and_grad(const Params& p, LossOfVars&& loss) {
  auto r = ad::value_and_grad(loss, p.tensors);
  struct result {
    decltype(r.loss) loss;
    Params grad;
  };
  return result{std::move(r.loss), Params{std::move(r.grad)}};
}

/// The factor a float16 model's loss is multiplied by before its backward pass (train::mixed<half>).
struct loss_scaling {
  float factor = 1.f;
};

/// Every tensor of a (nested) tuple of tensors converted by f.
template <class X, class F>
auto map_tensors(const X& x, F& f) {
  if constexpr (ad::detail::is_tuple_v<X>)
    return std::apply([&](const auto&... e) { return std::make_tuple(map_tensors(e, f)...); }, x);
  else return f(x);
}
template <class U>
struct converted_to {
  template <class T, class D, int R>
  tensor<U, D, R> operator()(const tensor<T, D, R>& t) const {
    return on<D>(cast<U>(t));
  }
};

/// A 16-bit gradient widened to float and divided by the loss scale (a power of two: exact).
struct unscaled {
  float inverse;
  template <class T, class D, int R>
  tensor<float, D, R> operator()(const tensor<T, D, R>& g) const {
    return on<D>(cast<float>(g) * inverse);
  }
};

/// loss(params-as-vars) and its gradient computed in H (a 16-bit type: train::mixed_precision):
/// the float parameters rounded to H copies (one kernel each), the vars made of those, the
/// gradients (H) widened back to float (one kernel each). The loss itself is float. For half the
/// loss is multiplied by `scale` (a power of two, train/loss_scale.hpp) before the backward pass and
/// the gradients divided by it as they are widened.
template <class H, class Params, class LossOfVars>
auto mixed_loss_and_grad(const Params& p, LossOfVars&& loss, loss_scaling scale) {
  converted_to<H> narrow;
  const auto low = map_tensors(p.tensors, narrow);
  if constexpr (std::is_same_v<H, half>) {
    auto r = ad::value_and_grad([&](const auto& vars) { return loss(vars) * scale.factor; }, low);
    using L = decltype(r.loss);
    static_assert(std::is_same_v<L, tensor<float, typename L::device_type, 0>>,
                  "locus: mixed precision: the loss must be float (cast the model's 16-bit output first)");
    const unscaled widen{1.f / scale.factor};
    struct result {
      L loss;
      Params grad;
    };
    return result{on<typename L::device_type>(r.loss * widen.inverse), Params{map_tensors(r.grad, widen)}};
  } else {
    (void)scale;
    converted_to<float> widen;
    auto r = ad::value_and_grad(loss, low);
    using L = decltype(r.loss);
    static_assert(std::is_same_v<L, tensor<float, typename L::device_type, 0>>,
                  "locus: mixed precision: the loss must be float (cast the model's 16-bit output first)");
    struct result {
      L loss;
      Params grad;
    };
    return result{std::move(r.loss), Params{map_tensors(r.grad, widen)}};
  }
}

/// The mean softmax cross-entropy of the logits `forward(params-as-vars)` and its gradient.
template <class Params, class Forward, device D>
auto classifier_loss_and_grad(const Params& p, const tensor<std::int32_t, D>& y, Forward&& forward) {
  return model_loss_and_grad(p, [&](const auto& vars) { return softmax_cross_entropy(forward(vars), y); });
}

inline void check_input(std::size_t got, std::size_t want, const char* model) {
  if (got != want)
    throw shape_error(std::string("locus: ") + model + ": a batch of " + std::to_string(got) + " features for " +
                      std::to_string(want) + " inputs");
}
}  // namespace detail

/// Layers applied in order; see the top of this file.
template <class... L>
class sequential {
  static_assert(sizeof...(L) > 0, "locus: sequential needs at least one layer");

public:
  using value_type = float;
  template <device D>
  using params = parameter_tuple<std::tuple<typename L::template params<D>...>>;

  explicit sequential(L... layers) : layers_(std::move(layers)...) { check_chain(); }
  /// The same model with another seed for its initial values (1 by default).
  [[nodiscard]] sequential with_seed(std::uint64_t seed) const {
    sequential s = *this;
    s.seed_ = seed;
    return s;
  }

  template <device D>
  [[nodiscard]] params<D> init() const {
    std::uint64_t dense_index = 0;
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      // A braced list: the layers are initialised in order (dense_index counts them).
      return params<D>{std::tuple<typename L::template params<D>...>{init_one<D>(std::get<I>(layers_), dense_index)...}};
    }(std::index_sequence_for<L...>{});
  }

  /// The loss and gradient of one batch; dropout draws its masks from the model's own count of
  /// calls (shared by its copies).
  template <device D>
  [[nodiscard]] auto loss_and_grad(const params<D>& p, const tensor<float, D, 2>& x, const tensor<std::int32_t, D>& y) const {
    return loss_and_grad(p, x, y, calls_->fetch_add(1, std::memory_order_relaxed));
  }
  /// The same with the random stream given (data_parallel's replicas pass theirs: see
  /// replica::draws()).
  template <device D>
  [[nodiscard]] auto loss_and_grad(const params<D>& p, const tensor<float, D, 2>& x, const tensor<std::int32_t, D>& y,
                                   std::uint64_t stream) const {
    detail::check_input(x.extent(1), inputs_, "sequential");
    const pass c{true, seed_ * 0x9E3779B97F4A7C15ull + stream};
    return detail::classifier_loss_and_grad(p, y, [&](const auto& vars) { return forward<0>(x, vars, c); });
  }

  /// loss_and_grad with the forward and backward passes in H (bfloat16): train::mixed_precision.
  template <class H, device D>
  [[nodiscard]] auto loss_and_grad_in(const params<D>& p, const tensor<float, D, 2>& x,
                                      const tensor<std::int32_t, D>& y, detail::loss_scaling scale = {}) const {
    return loss_and_grad_in<H>(p, x, y, calls_->fetch_add(1, std::memory_order_relaxed), scale);
  }
  template <class H, device D>
  [[nodiscard]] auto loss_and_grad_in(const params<D>& p, const tensor<float, D, 2>& x,
                                      const tensor<std::int32_t, D>& y, std::uint64_t stream,
                                      detail::loss_scaling scale = {}) const {
    detail::check_input(x.extent(1), inputs_, "sequential");
    const pass c{true, seed_ * 0x9E3779B97F4A7C15ull + stream};
    const tensor<H, D, 2> xh = on<D>(cast<H>(x));
    return detail::mixed_loss_and_grad<H>(
        p, [&](const auto& vars) { return softmax_cross_entropy(cast<float>(forward<0>(xh, vars, c)), y); }, scale);
  }

  /// The mean loss of one batch in evaluation mode (no dropout; no gradient).
  template <device D>
  [[nodiscard]] tensor<float, D, 0> loss(const params<D>& p, const tensor<float, D, 2>& x,
                                         const tensor<std::int32_t, D>& y) const {
    detail::check_input(x.extent(1), inputs_, "sequential");
    return ad::value_of([&](const auto& vars) { return softmax_cross_entropy(forward<0>(x, vars, pass{}), y); },
                        p.tensors);
  }

  template <device D>
  [[nodiscard]] tensor<std::int64_t, D> predict(const params<D>& p, const tensor<float, D, 2>& x) const {
    detail::check_input(x.extent(1), inputs_, "sequential");
    return on<D>(argmax<1>(forward<0>(x, p.tensors, pass{})));
  }

  /// The logits of x (no dropout).
  template <device D>
  [[nodiscard]] tensor<float, D, 2> logits(const params<D>& p, const tensor<float, D, 2>& x) const {
    detail::check_input(x.extent(1), inputs_, "sequential");
    return on<D>(forward<0>(x, p.tensors, pass{}));
  }

  [[nodiscard]] const std::tuple<L...>& layers() const noexcept { return layers_; }
  /// The number of classes, the last dense layer's outputs: labels lie in [0, classes())
  /// (data_parallel checks them before training).
  [[nodiscard]] std::size_t classes() const noexcept { return classes_; }

private:
  template <device D, class Layer>
  auto init_one(const Layer& l, std::uint64_t& dense_index) const {
    if constexpr (std::is_same_v<Layer, nn::dense> || std::is_same_v<Layer, nn::conv2d>)
      return l.template init<D>(seed_ * 1000 + dense_index++);
    else return l.template init<D>(0);
  }

  template <std::size_t I, class X, class P>
  auto forward(X&& x, const P& ps, const pass& c) const {
    auto y = std::get<I>(layers_)(std::forward<X>(x), std::get<I>(ps), c.site(I));
    if constexpr (I + 1 == sizeof...(L)) return y;
    else return forward<I + 1>(std::move(y), ps, c);
  }

  /// Follows one example's shape through the layers: rows of `width` features, or an image
  /// [C, H, W] after nn::reshape; throws naming the first layer whose input does not fit.
  void check_chain() {
    std::size_t width = 0, index = 0;
    std::optional<shape<3>> image;  // [C, H, W] after nn::reshape, until nn::flatten
    const auto at = [&](const std::string& kind) { return "locus: sequential: layer " + std::to_string(index) + " (" + kind + ")"; };
    const auto first = [&] { return width == 0 && !image; };
    auto one = [&](const auto& l) {
      using Layer = std::remove_cvref_t<decltype(l)>;
      if constexpr (std::is_same_v<Layer, nn::dense>) {
        const std::string kind = "dense(" + std::to_string(l.in) + ", " + std::to_string(l.out) + ")";
        if (image)
          throw shape_error(at(kind) + " after a layer of images " + image->str() + " per example: put nn::flatten before it");
        if (width != 0 && l.in != width)
          throw shape_error("locus: sequential: layer " + std::to_string(index) + " is dense(" + std::to_string(l.in) +
                            ", " + std::to_string(l.out) + ") after a layer of " + std::to_string(width) + " outputs");
        if (first()) inputs_ = l.in;
        width = l.out;
      } else if constexpr (std::is_same_v<Layer, nn::conv2d>) {
        if (!image)
          throw shape_error(at(l.str()) + ": its input is not an image; start with nn::reshape(shape{C, H, W})");
        try {
          const auto g = locus::detail::conv_geometry_of(shape{1, (*image)[0], (*image)[1], (*image)[2]}, l.weight_shape(),
                                                         l.options);
          image = shape{g.k, g.oh, g.ow};
        } catch (const error& e) {
          throw shape_error(at(l.str()) + " on images " + image->str() + ": " + e.what());
        }
      } else if constexpr (requires { l.window; l.stride; }) {
        if (!image) throw shape_error(at(l.str()) + ": its input is not an image; start with nn::reshape(shape{C, H, W})");
        try {
          const auto g = locus::detail::pool_geometry_of(Layer::name(), shape{1, (*image)[0], (*image)[1], (*image)[2]},
                                                         l.window, l.stride);
          image = shape{g.c, g.oh, g.ow};
        } catch (const error& e) {
          throw shape_error(at(l.str()) + " on images " + image->str() + ": " + e.what());
        }
      } else if constexpr (requires { l.example; }) {
        const std::size_t n = l.example.size();
        if (first()) inputs_ = n;
        else if (image || width != n)
          throw shape_error(at("reshape(" + l.example.str() + ")") + " after a layer of " +
                            (image ? "images " + image->str() : std::to_string(width) + " outputs") + " per example");
        if constexpr (Layer::rank == 3) {
          image = l.example;
          width = 0;
        } else {
          width = n;
        }
      } else if constexpr (std::is_same_v<Layer, nn::flatten_layer>) {
        if (image) width = image->size();
        image.reset();
      }
      ++index;  // relu, tanh, sigmoid and dropout keep the shape
    };
    std::apply([&](const auto&... l) { (one(l), ...); }, layers_);
    if (inputs_ == 0) throw shape_error("locus: sequential: no dense layer (nothing to train)");
    if (image)
      throw shape_error("locus: sequential: the last layer gives images " + image->str() +
                        " per example; a classifier ends in rows of logits (nn::flatten, then nn::dense)");
    classes_ = width;
  }

  std::tuple<L...> layers_;
  std::uint64_t seed_ = 1;
  std::size_t inputs_ = 0;
  std::size_t classes_ = 0;
  std::shared_ptr<std::atomic<std::uint64_t>> calls_ = std::make_shared<std::atomic<std::uint64_t>>(0);
};

/// The initial values of a functional model's parameters, in the order its forward reads them.
template <class... I>
struct parameters {
  std::tuple<I...> inits;
  parameters(I... i) : inits(std::move(i)...) {}  // NOLINT(google-explicit-constructor)
};

namespace detail {
struct softmax_cross_entropy_loss {
  template <class Z, class Y>
  auto operator()(Z&& logits, const Y& labels) const {
    return softmax_cross_entropy(std::forward<Z>(logits), labels);
  }
};

/// The model's output (a var or an expression of vars) evaluated, checked against the targets'
/// shape (the float-target losses compare them element by element).
template <class Z, class T>
auto output_like(const char* loss, Z&& out, const T& targets) {
  auto z = ad::evaluate(std::forward<Z>(out));
  static_assert(decltype(z)::rank == 2, "locus: a loss of float targets compares the model's output with targets "
                                        "[rows, k]: the output must be rank 2 [rows, k] too (one row per example)");
  if constexpr (decltype(z)::rank == 2)
    if (!(z.value().shape() == targets.shape()))
      throw shape_error(std::string("locus: ") + loss + ": outputs " + z.value().shape().str() + " and targets " +
                        targets.shape().str() + " differ in shape");
  return z;
}

struct mean_squared_error_loss {
  using target_type = float;
  template <class Z, class T>
  auto operator()(Z&& out, const T& targets) const {
    auto z = output_like("mean_squared_error", std::forward<Z>(out), targets);
    return ad::mean((z - targets) * (z - targets));
  }
};

struct binary_cross_entropy_loss {
  using target_type = float;
  template <class Z, class T>
  auto operator()(Z&& logits, const T& targets) const {
    auto z = output_like("binary_cross_entropy", std::forward<Z>(logits), targets);
    // Targets outside [0, 1] make the loss unbounded below: refused (one reduction over the batch's
    // targets, NaN counted too).
    using D = typename T::device_type;
    const double outside =
        double(on<D>(locus::sum(locus::where(targets >= 0.f, locus::where(targets <= 1.f, 0.f, 1.f), 1.f))).item());
    if (outside > 0)
      throw data::data_error("locus: binary_cross_entropy: " + std::to_string(std::size_t(outside)) +
                             " target(s) of the batch outside [0, 1] (or NaN): they are probabilities");
    // -t log s(z) - (1 - t) log(1 - s(z)) = max(z, 0) - z t + log(1 + exp(-|z|)): no overflow for
    // any z. At z = 0 both kinks take their right derivative (max's tie goes to z, |z|' = 1): 1 -
    // t - 1/2, the true s(0) - t.
    return ad::mean(locus::max(z, 0.f) - z * targets + locus::log(1.f + locus::exp(-locus::abs(z))));
  }
};

template <class F>
struct float_target_loss {
  using target_type = float;
  F f;
  template <class... A>
    requires std::invocable<const F&, A...>
  auto operator()(A&&... a) const {
    return std::invoke(f, std::forward<A>(a)...);
  }
};

/// The targets a functional model's loss takes: Loss::target_type (float for the losses of float
/// targets), else int32 labels.
template <class L>
struct loss_targets {
  using type = std::int32_t;
};
template <class L>
  requires requires { typename L::target_type; }
struct loss_targets<L> {
  using type = typename L::target_type;
};
}  // namespace detail

/// Losses for train::functional: a function of (model output, targets), or of (model output,
/// targets, parameters) for terms that read the parameters (weight decay), returning a rank-0
/// differentiable value (mean or sum it). The targets are int32 labels (a tensor<std::int32_t, D>)
/// unless the loss declares `using target_type = float;` (the two below, or any function wrapped
/// by losses::regression): then float targets [rows, k] (a tensor<float, D, 2>), and the model
/// trains on data sets of float targets (data::make_dataset(features, row_size, targets, k)).
namespace losses {
/// The mean softmax cross-entropy of logits [rows, classes] against int32 labels: the default.
inline constexpr detail::softmax_cross_entropy_loss softmax_cross_entropy{};
/// The mean of (output - target)^2 over every element; outputs and targets of the same shape.
inline constexpr detail::mean_squared_error_loss mean_squared_error{};
/// The mean binary cross-entropy of logits z against targets t in [0, 1], element by element
/// (-t log sigmoid(z) - (1 - t) log(1 - sigmoid(z)), computed without overflow).
inline constexpr detail::binary_cross_entropy_loss binary_cross_entropy{};
/// A loss function of (output, float targets[, params]) of your own:
/// `losses::regression([](const auto& z, const auto& t) { return ad::mean(abs(z - t)); })`.
template <class F>
[[nodiscard]] detail::float_target_loss<F> regression(F f) {
  return {std::move(f)};
}
}  // namespace losses

template <class Inits, class Forward, class Loss = detail::softmax_cross_entropy_loss>
class functional;

/// A model given as its parameters' initial values, a forward function and a loss; see the top of
/// this file. Parameter k starts from inits[k] with the seed seed * 1000 + k. The forward function
/// is `(params, x)` or `(params, x, const pass&)`: with the pass it may use dropout
/// (`nn::dropout(rate)(h, s.site(k))`, a distinct site k for each); it is called with the
/// parameters as ad::vars when training and as tensors (and a pass that is not training) when
/// predicting. The loss is `(output, targets)` or `(output, targets, params)` (as vars), rank 0;
/// softmax cross-entropy by default (see losses). A classifier's predict() is the row-wise argmax
/// of the output; output() is the output itself (a regression's prediction).
template <class... I, class Forward, class Loss>
class functional<parameters<I...>, Forward, Loss> {
public:
  using value_type = float;
  /// int32 labels, or float for a loss of float targets (train::trains_on_values).
  using target_type = typename detail::loss_targets<Loss>::type;
  template <device D>
  using params = parameter_tuple<std::tuple<tensor<float, D, I::rank>...>>;
  /// What loss_and_grad takes as y: labels [rows], or float targets [rows, k].
  template <device D>
  using targets = std::conditional_t<std::is_same_v<target_type, float>, tensor<float, D, 2>, tensor<std::int32_t, D>>;

  functional(parameters<I...> inits, Forward forward, std::uint64_t seed = 1)
    requires std::is_default_constructible_v<Loss>
      : inits_(std::move(inits)), forward_(std::move(forward)), seed_(seed) {}
  functional(parameters<I...> inits, Forward forward, Loss loss, std::uint64_t seed = 1)
      : inits_(std::move(inits)), forward_(std::move(forward)), loss_(std::move(loss)), seed_(seed) {}

  template <device D>
  [[nodiscard]] params<D> init() const {
    return [&]<std::size_t... K>(std::index_sequence<K...>) {
      return params<D>{std::tuple<tensor<float, D, I::rank>...>{
          std::get<K>(inits_.inits).template make<D>(seed_ * 1000 + K)...}};
    }(std::index_sequence_for<I...>{});
  }

  /// The loss and gradient of one batch; dropout draws its masks from the model's own count of
  /// calls (shared by its copies).
  template <device D>
  [[nodiscard]] auto loss_and_grad(const params<D>& p, const tensor<float, D, 2>& x, const targets<D>& y) const {
    return loss_and_grad(p, x, y, calls_->fetch_add(1, std::memory_order_relaxed));
  }
  /// The same with the random stream given (data_parallel's replicas pass theirs).
  template <device D>
  [[nodiscard]] auto loss_and_grad(const params<D>& p, const tensor<float, D, 2>& x, const targets<D>& y,
                                   std::uint64_t stream) const {
    const pass c{true, seed_ * 0x9E3779B97F4A7C15ull + stream};
    return detail::model_loss_and_grad(
        p, [&](const auto& vars) { return loss_of(forward_of(vars, x, c), y, vars); });
  }

  /// loss_and_grad with the forward and backward passes in H (bfloat16): train::mixed_precision.
  /// The forward function gets H vars and an H batch; its output is widened to float for the loss.
  template <class H, device D>
  [[nodiscard]] auto loss_and_grad_in(const params<D>& p, const tensor<float, D, 2>& x, const targets<D>& y,
                                      detail::loss_scaling scale = {}) const {
    return loss_and_grad_in<H>(p, x, y, calls_->fetch_add(1, std::memory_order_relaxed), scale);
  }
  template <class H, device D>
  [[nodiscard]] auto loss_and_grad_in(const params<D>& p, const tensor<float, D, 2>& x, const targets<D>& y,
                                      std::uint64_t stream, detail::loss_scaling scale = {}) const {
    const pass c{true, seed_ * 0x9E3779B97F4A7C15ull + stream};
    const tensor<H, D, 2> xh = on<D>(cast<H>(x));
    return detail::mixed_loss_and_grad<H>(
        p, [&](const auto& vars) { return loss_of(cast<float>(forward_of(vars, xh, c)), y, vars); }, scale);
  }

  /// The mean loss of one batch in evaluation mode (no dropout; no gradient).
  template <device D>
  [[nodiscard]] tensor<float, D, 0> loss(const params<D>& p, const tensor<float, D, 2>& x, const targets<D>& y) const {
    return ad::value_of([&](const auto& vars) { return loss_of(forward_of(vars, x, pass{}), y, vars); }, p.tensors);
  }

  /// The class of each row: the row-wise argmax of the output (a classifier's).
  template <device D>
    requires(!std::is_same_v<target_type, float>)
  [[nodiscard]] tensor<std::int64_t, D> predict(const params<D>& p, const tensor<float, D, 2>& x) const {
    return on<D>(argmax<1>(forward_of(p.tensors, x, pass{})));
  }

  /// The forward function's output for x (no dropout): a regression's predictions.
  template <device D>
  [[nodiscard]] auto output(const params<D>& p, const tensor<float, D, 2>& x) const {
    return on<D>(forward_of(p.tensors, x, pass{}));
  }

private:
  template <class P, class X>
  decltype(auto) forward_of(const P& ps, const X& x, const pass& c) const {
    if constexpr (requires { forward_(ps, x, c); }) return forward_(ps, x, c);
    else return forward_(ps, x);
  }
  template <class Z, class Y, class P>
  decltype(auto) loss_of(Z&& out, const Y& y, const P& ps) const {
    if constexpr (requires { loss_(std::forward<Z>(out), y, ps); }) return loss_(std::forward<Z>(out), y, ps);
    else return loss_(std::forward<Z>(out), y);
  }

  parameters<I...> inits_;
  Forward forward_;
  Loss loss_{};
  std::uint64_t seed_;
  std::shared_ptr<std::atomic<std::uint64_t>> calls_ = std::make_shared<std::atomic<std::uint64_t>>(0);
};

template <class P, class F>
functional(P, F) -> functional<P, F>;
template <class P, class F>
functional(P, F, std::uint64_t) -> functional<P, F>;
template <class P, class F, class L>
  requires(!std::integral<L>)
functional(P, F, L) -> functional<P, F, L>;
template <class P, class F, class L>
functional(P, F, L, std::uint64_t) -> functional<P, F, L>;

}  // namespace locus::train
