#pragma once
// The neural-network pieces, on the device their operands live on (the result type says where):
//   softmax(z), log_softmax(z)            row-wise and numerically stable (the row maximum first)
//   softmax_cross_entropy(z, labels)      the mean loss and its gradient with respect to z
//   dense_forward(x, w, b), dense_relu_forward(x, w, b), dense_backward(x, w, dy)
//   relu_backward(dy, y), tanh_backward(dy, y), sigmoid_backward(dy, y)   (y: the layer's output)
//   one_hot<T>(labels, classes), col_index(shape)
// Each step is a fused expression, reduction or matrix product evaluated with on<D>, so every
// operand must live on the same device D (a compile error otherwise).
#include <locus/backend/parallel.hpp>
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/expr/node.hpp>
#include <locus/expr/operators.hpp>
#include <locus/log.hpp>
#include <locus/ops/matmul.hpp>
#include <locus/ops/reduce.hpp>
#include <locus/placement/on.hpp>
#include <locus/tensor/tensor.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

namespace locus {

namespace detail {
struct column_of {
  expr::divisor cols;
  LOCUS_HOST_DEVICE std::int64_t operator()(std::size_t i) const { return static_cast<std::int64_t>(cols.mod(i)); }
  LOCUS_HOST_DEVICE std::int64_t at(std::size_t, std::size_t, std::size_t c) const { return static_cast<std::int64_t>(c); }
};
template <class T, class D, class L>
void check_labels(const tensor<T, D, 2>& z, const tensor<L, D, 1>& labels, const char* what) {
  if (labels.size() != z.extent(0))
    throw shape_error(std::string("locus: ") + what + ": " + std::to_string(labels.size()) + " labels for logits of shape " +
                      z.shape().str());
}
}  // namespace detail

/// An expression of shape s whose element (i, j) is j.
[[nodiscard]] inline auto col_index(shape<2> s) {
  return expr::generated<detail::column_of, 2>{{expr::divisor(s[1])}, s, "col_index", "Range"};
}

/// one_hot<T>(labels, classes): [n, classes] with 1 at (i, labels[i]); labels out of range give a zero row.
template <class T, class L, device D>
[[nodiscard]] auto one_hot(const tensor<L, D, 1>& labels, std::size_t classes) {
  static_assert(std::is_integral_v<L>, "locus: one_hot takes integer labels");
  return cast<T>(col(labels) == col_index(shape{labels.size(), classes}));
}

/// Row-wise softmax of logits z [rows, classes].
template <class T, device D>
[[nodiscard]] tensor<T, D, 2> softmax(const tensor<T, D, 2>& z) {
  static_assert(std::is_floating_point_v<T>, "locus: softmax needs float or double logits (bfloat16 or half ones: cast<float>(z) first)");
  auto row_max = on<D>(max<1>(z));
  auto row_sum = on<D>(sum<1>(exp(z - col(row_max))));
  return on<D>(exp(z - col(row_max)) / col(row_sum));
}

/// Row-wise log-softmax: z - max - log(sum(exp(z - max))).
template <class T, device D>
[[nodiscard]] tensor<T, D, 2> log_softmax(const tensor<T, D, 2>& z) {
  static_assert(std::is_floating_point_v<T>, "locus: log_softmax needs float or double logits (bfloat16 or half ones: cast<float>(z) first)");
  auto row_max = on<D>(max<1>(z));
  auto row_sum = on<D>(sum<1>(exp(z - col(row_max))));
  return on<D>(z - col(row_max) - col(log(row_sum)));
}

template <class T, device D>
struct loss_and_gradient {
  tensor<T, D, 0> loss;      ///< mean cross-entropy over the rows
  tensor<T, D, 2> gradient;  ///< d loss / d z = (softmax(z) - one_hot(labels)) / rows
};

namespace detail {
/// One row of softmax cross-entropy: the row's loss and its gradient row, in one pass over the
/// logits (the exponentials are kept in the gradient row and scaled there). Acc: the sum's type.
template <class T, class L, class Acc>
struct softmax_xent_row {
  const T* z;
  const L* labels;
  T* grad;
  T* loss;
  std::size_t classes;
  T rows;
  LOCUS_HOST_DEVICE void operator()(std::size_t r) const {
    const T* zr = z + r * classes;
    T* gr = grad + r * classes;
    T m = zr[0];
    for (std::size_t c = 1; c < classes; ++c) m = zr[c] > m ? zr[c] : m;
    Acc s = 0;
    for (std::size_t c = 0; c < classes; ++c) {
      gr[c] = std::exp(zr[c] - m);
      s += static_cast<Acc>(gr[c]);
    }
    const auto label = static_cast<std::int64_t>(labels[r]);  // out of range: no class is picked
    const bool in_range = label >= 0 && static_cast<std::uint64_t>(label) < classes;
    // -log softmax(z)[r, label] = (max - z[r, label]) + log(sum): the difference first, exact for
    // large logits
    loss[r] = (m - (in_range ? zr[label] : T(0))) + static_cast<T>(std::log(static_cast<T>(s)));
    const T sum = static_cast<T>(s);
    for (std::size_t c = 0; c < classes; ++c) gr[c] = gr[c] / sum / rows;
    if (in_range) gr[label] -= T(1) / rows;
  }
};
}  // namespace detail

/// Softmax cross-entropy of logits z [rows, classes] against integer labels [rows], and its
/// gradient: one kernel over the rows (each row's maximum, sum, loss and gradient together), then
/// the mean of the row losses. Labels outside [0, classes) pick no class (the loss is the row's
/// log-sum-exp, the gradient its softmax). Logged as SoftmaxCrossEntropyWithLogits. Throws
/// shape_error when the counts differ.
template <class T, device D, class L>
[[nodiscard]] loss_and_gradient<T, D> softmax_cross_entropy(const tensor<T, D, 2>& z, const tensor<L, D, 1>& labels) {
  static_assert(std::is_floating_point_v<T>, "locus: softmax_cross_entropy needs float or double logits (bfloat16 or half ones: cast<float>(z) first)");
  static_assert(std::is_integral_v<L>, "locus: softmax_cross_entropy takes integer labels");
  detail::check_labels(z, labels, "softmax_cross_entropy");
  const std::size_t rows = z.extent(0), classes = z.extent(1);
  if (classes == 0) throw shape_error("locus: softmax_cross_entropy: logits of shape " + z.shape().str() + " have no classes");
  const locus::detail::log_entry entry;  // the loss and its mean: one evaluation of the log
  if (entry) locus::detail::log_visitor(id_of<D>).op("softmax_cross_entropy", "SoftmaxCrossEntropyWithLogits");
  auto grad = tensor<T, D, 2>::uninitialized_of(z.shape());
  auto row_loss = tensor<T, D, 1>::uninitialized_of(shape{rows});
  // The host sums each row's exponentials in double (as the host reductions do).
  using acc = std::conditional_t<backend::runs_on_host<D> && std::is_same_v<T, float>, double, T>;
  backend::for_each_index<D>(rows, detail::softmax_xent_row<T, L, acc>{z.data(), labels.data(), grad.data(),
                                                                       row_loss.data(), classes, T(rows)},
                             classes);
  auto loss = on<D>(mean(row_loss));
  return {std::move(loss), std::move(grad)};
}

/// y = x w + b: x [batch, in], w [in, out], b [out].
template <class T, device D>
[[nodiscard]] tensor<T, D, 2> dense_forward(const tensor<T, D, 2>& x, const tensor<T, D, 2>& w, const tensor<T, D, 1>& b) {
  if (b.size() != w.extent(1))
    throw shape_error("locus: dense_forward: bias of shape " + b.shape().str() + " for weights of shape " + w.shape().str());
  auto y = on<D>(matmul(x, w));
  y = y + b;  // the bias, broadcast over the rows, in place
  return y;
}

/// y = relu(x w + b): the bias and the activation in one pass after the product.
template <class T, device D>
[[nodiscard]] tensor<T, D, 2> dense_relu_forward(const tensor<T, D, 2>& x, const tensor<T, D, 2>& w,
                                                 const tensor<T, D, 1>& b) {
  if (b.size() != w.extent(1))
    throw shape_error("locus: dense_relu_forward: bias of shape " + b.shape().str() + " for weights of shape " +
                      w.shape().str());
  auto y = on<D>(matmul(x, w));
  y = relu(y + b);
  return y;
}

template <class T, device D>
struct dense_gradients {
  tensor<T, D, 2> dx;  ///< dy w^T
  tensor<T, D, 2> dw;  ///< x^T dy
  tensor<T, D, 1> db;  ///< the column sums of dy
};

/// The gradients of y = x w + b given dy = d loss / d y. With input_gradient false, dx is left
/// empty (the first layer of a network needs no gradient for its input: one product saved).
template <class T, device D>
[[nodiscard]] dense_gradients<T, D> dense_backward(const tensor<T, D, 2>& x, const tensor<T, D, 2>& w,
                                                   const tensor<T, D, 2>& dy, bool input_gradient = true) {
  tensor<T, D, 2> dx;
  if (input_gradient) dx = on<D>(matmul(dy, transpose(w)));
  return {std::move(dx), on<D>(matmul(transpose(x), dy)), on<D>(sum<0>(dy))};
}

/// Backward of the activations, written in terms of their output y (what a forward pass keeps).
template <class DY, class Y>
[[nodiscard]] auto relu_backward(DY&& dy, Y&& y) {
  return where(std::forward<Y>(y) > 0, std::forward<DY>(dy), 0);
}
template <class DY, class Y>
[[nodiscard]] auto tanh_backward(DY&& dy, Y&& y) {
  auto yy = expr::as_node(std::forward<Y>(y));
  return std::forward<DY>(dy) * (1 - yy * yy);
}
template <class DY, class Y>
[[nodiscard]] auto sigmoid_backward(DY&& dy, Y&& y) {
  auto yy = expr::as_node(std::forward<Y>(y));
  return std::forward<DY>(dy) * yy * (1 - yy);
}

}  // namespace locus
