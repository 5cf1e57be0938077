#include "../common/test_support.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

using namespace locus;
using locus_test::random_values;

namespace {

using nn_cases = std::tuple<locus_test::on_device<cpu, double>, locus_test::on_device<cpu, float>
#if LOCUS_HAS_GPUS
                            , locus_test::on_device<gpu<1>, double>, locus_test::on_device<gpu<0>, float>
#endif
                            >;

template <class T>
double fd_tol() {
  return std::is_same_v<T, double> ? 1e-6 : 2e-2;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("softmax and log_softmax are row-wise and stable", "[ops][nn]", nn_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const std::size_t rows = 5, cols = 7;
  auto hz = random_values<T>(rows * cols, -3, 3, 31);
  hz[3] = T(1000);  // exp(1000) overflows: the row maximum must be taken out first
  tensor<T, D, 2> z(shape{rows, cols}, hz);
  const auto p = softmax(z).to_vector();
  const auto lp = log_softmax(z).to_vector();
  for (std::size_t r = 0; r < rows; ++r) {
    double m = -1e300, s = 0;
    for (std::size_t c = 0; c < cols; ++c) m = std::max(m, double(hz[r * cols + c]));
    for (std::size_t c = 0; c < cols; ++c) s += std::exp(double(hz[r * cols + c]) - m);
    double total = 0;
    for (std::size_t c = 0; c < cols; ++c) {
      const double ref = std::exp(double(hz[r * cols + c]) - m) / s;
      CHECK(std::abs(p[r * cols + c] - ref) < 1e-6);
      CHECK(std::abs(lp[r * cols + c] - (double(hz[r * cols + c]) - m - std::log(s))) < 1e-4);
      CHECK(std::isfinite(double(p[r * cols + c])));
      total += p[r * cols + c];
    }
    CHECK(std::abs(total - 1.0) < 1e-5);
  }
}

TEMPLATE_LIST_TEST_CASE("softmax cross-entropy: the loss against a loop, the gradient against finite differences",
                        "[ops][nn][gradient]", nn_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const std::size_t rows = 6, classes = 4;
  const auto hz = random_values<T>(rows * classes, -2, 2, 32);
  const std::vector<std::int32_t> hl{0, 3, 1, 1, 2, 0};
  tensor<T, D, 2> z(shape{rows, classes}, hz);
  tensor<std::int32_t, D> labels(hl);
  auto [loss, grad] = softmax_cross_entropy(z, labels);
  auto loss_of = [&](const std::vector<T>& v) {
    double total = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      double m = -1e300, s = 0;
      for (std::size_t c = 0; c < classes; ++c) m = std::max(m, double(v[r * classes + c]));
      for (std::size_t c = 0; c < classes; ++c) s += std::exp(double(v[r * classes + c]) - m);
      total += std::log(s) + m - double(v[r * classes + hl[r]]);
    }
    return total / double(rows);
  };
  CHECK(std::abs(loss.item() - loss_of(hz)) < 1e-5);
  const auto g = grad.to_vector();
  const double h = std::is_same_v<T, double> ? 1e-6 : 1e-2;
  for (std::size_t i = 0; i < hz.size(); ++i) {
    auto plus = hz, minus = hz;
    plus[i] += T(h);
    minus[i] -= T(h);
    const double numeric = (loss_of(plus) - loss_of(minus)) / (double(plus[i]) - double(minus[i]));
    CHECK(std::abs(g[i] - numeric) < fd_tol<T>());
  }
  tensor<std::int32_t, D> short_labels{0, 1};
  CHECK_THROWS_WITH(softmax_cross_entropy(z, short_labels),
                    "locus: softmax_cross_entropy: 2 labels for logits of shape [6, 4]");
  tensor<T, D, 2> no_classes(shape{6, 0});
  CHECK_THROWS_WITH(softmax_cross_entropy(no_classes, labels),
                    "locus: softmax_cross_entropy: logits of shape [6, 0] have no classes");
}

TEMPLATE_LIST_TEST_CASE("softmax cross-entropy: a label outside the classes picks none, large logits stay finite",
                        "[ops][nn]", nn_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  // Row 0: label -1, row 1: label 3 (of 3 classes): the loss is the row's log-sum-exp and the
  // gradient its softmax / rows. Row 2: logits near the float limit, label 2.
  const std::vector<T> hz{T(1), T(2), T(3), T(0.5), T(-1), T(2), T(3e37), T(2e37), T(3e37)};
  tensor<T, D, 2> z(shape{3, 3}, hz);
  tensor<std::int32_t, D> labels{-1, 3, 2};
  auto [loss, grad] = softmax_cross_entropy(z, labels);
  double want = 0;
  std::vector<double> want_grad(9);
  for (std::size_t r = 0; r < 3; ++r) {
    double m = -1e300, s = 0;
    for (std::size_t c = 0; c < 3; ++c) m = std::max(m, double(hz[r * 3 + c]));
    for (std::size_t c = 0; c < 3; ++c) s += std::exp(double(hz[r * 3 + c]) - m);
    want += (m - (r == 2 ? double(hz[8]) : 0.0)) + std::log(s);
    for (std::size_t c = 0; c < 3; ++c)
      want_grad[r * 3 + c] = (std::exp(double(hz[r * 3 + c]) - m) / s - (r == 2 && c == 2 ? 1.0 : 0.0)) / 3;
  }
  want /= 3;
  CHECK(std::isfinite(double(loss.item())));
  CHECK(std::abs(double(loss.item()) - want) <= 1e-6 * std::abs(want));
  const auto g = grad.to_vector();
  for (std::size_t i = 0; i < 9; ++i) CHECK(std::abs(double(g[i]) - want_grad[i]) < 1e-6);
  locus_test::log_capture log;
  auto again = softmax_cross_entropy(z, labels);
  REQUIRE(!log.lines.empty());
  CHECK(log.lines.front() == "softmax_cross_entropy: (SoftmaxCrossEntropyWithLogits): " + locus_test::logged(id_of<D>));
}

TEMPLATE_LIST_TEST_CASE("dense layer backward against finite differences", "[ops][nn][gradient]", nn_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const std::size_t batch = 3, in = 5, out = 4;
  const auto hx = random_values<T>(batch * in, -1, 1, 33), hw = random_values<T>(in * out, -1, 1, 34);
  const auto hb = random_values<T>(out, -1, 1, 35), hr = random_values<T>(batch * out, -1, 1, 36);
  tensor<T, D, 2> x(shape{batch, in}, hx), w(shape{in, out}, hw), r(shape{batch, out}, hr);
  tensor<T, D> b(hb);
  // L = sum(dense(x) * r), so dL/dy = r.
  auto loss_of = [&](const std::vector<T>& vx, const std::vector<T>& vw, const std::vector<T>& vb) {
    double total = 0;
    for (std::size_t i = 0; i < batch; ++i)
      for (std::size_t j = 0; j < out; ++j) {
        double y = vb[j];
        for (std::size_t p = 0; p < in; ++p) y += double(vx[i * in + p]) * vw[p * out + j];
        total += y * hr[i * out + j];
      }
    return total;
  };
  const auto y = dense_forward(x, w, b).to_vector();
  double forward = 0;
  for (std::size_t i = 0; i < y.size(); ++i) forward += double(y[i]) * hr[i];
  CHECK(std::abs(forward - loss_of(hx, hw, hb)) < 1e-4);
  auto grads = dense_backward(x, w, r);
  const double h = std::is_same_v<T, double> ? 1e-6 : 1e-2;
  auto check = [&](const std::vector<T>& analytic, auto perturbed_loss, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      const double numeric = (perturbed_loss(i, h) - perturbed_loss(i, -h)) / (2 * h);
      CHECK(std::abs(analytic[i] - numeric) < fd_tol<T>());
    }
  };
  check(grads.dx.to_vector(), [&](std::size_t i, double d) { auto v = hx; v[i] += T(d); return loss_of(v, hw, hb); }, hx.size());
  check(grads.dw.to_vector(), [&](std::size_t i, double d) { auto v = hw; v[i] += T(d); return loss_of(hx, v, hb); }, hw.size());
  check(grads.db.to_vector(), [&](std::size_t i, double d) { auto v = hb; v[i] += T(d); return loss_of(hx, hw, v); }, hb.size());
  tensor<T, D> wrong_bias(shape{3});
  CHECK_THROWS_AS(dense_forward(x, w, wrong_bias), shape_error);
}

TEMPLATE_LIST_TEST_CASE("activation backward passes against finite differences", "[ops][nn][gradient]", nn_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const auto hx = random_values<T>(64, -3, 3, 37), hdy = random_values<T>(64, -1, 1, 38);
  tensor<T, D> x(hx), dy(hdy);
  const auto relu_y = on<D>(relu(x)), tanh_y = on<D>(tanh(x)), sig_y = on<D>(sigmoid(x));
  const auto g_relu = on<D>(relu_backward(dy, relu_y)).to_vector();
  const auto g_tanh = on<D>(tanh_backward(dy, tanh_y)).to_vector();
  const auto g_sig = on<D>(sigmoid_backward(dy, sig_y)).to_vector();
  const double h = 1e-4;
  for (std::size_t i = 0; i < hx.size(); ++i) {
    const double v = hx[i];
    const double d_relu = ((v + h > 0 ? v + h : 0) - (v - h > 0 ? v - h : 0)) / (2 * h);
    const double d_tanh = (std::tanh(v + h) - std::tanh(v - h)) / (2 * h);
    const double d_sig = (1 / (1 + std::exp(-(v + h))) - 1 / (1 + std::exp(-(v - h)))) / (2 * h);
    if (std::abs(v) > 1e-3) CHECK(std::abs(g_relu[i] - hdy[i] * d_relu) < 1e-5);
    CHECK(std::abs(g_tanh[i] - hdy[i] * d_tanh) < 1e-4);
    CHECK(std::abs(g_sig[i] - hdy[i] * d_sig) < 1e-4);
  }
}

TEST_CASE("one_hot and col_index", "[ops][nn]") {
  tensor<std::int32_t, cpu> labels{2, 0, 5};
  auto oh = on<cpu>(one_hot<float>(labels, 3));
  CHECK(oh.shape() == shape{3, 3});
  CHECK(oh.to_vector() == std::vector<float>{0, 0, 1, 1, 0, 0, 0, 0, 0});  // 5 is out of range: a zero row
  CHECK(on<cpu>(col_index(shape{2, 3})).to_vector() == std::vector<std::int64_t>{0, 1, 2, 0, 1, 2});
}

TEST_CASE("generated operands refuse a shape whose element count wraps size_t", "[ops][nn][random][errors]") {
  // Nothing is allocated for a whole reduction of them: without the check, sum(col_index) of
  // [2^63 + 1, 2] summed the 2 elements the count wraps to.
  const std::size_t big = (std::size_t{1} << 63) + 1;
  CHECK_THROWS_WITH(col_index(shape{big, std::size_t{2}}),
                    "locus: col_index: the shape [9223372036854775809, 2] has more elements than size_t can count");
  CHECK_THROWS_WITH(random::uniform<float>(shape{big, std::size_t{2}}, 1),
                    "locus: random_uniform: the shape [9223372036854775809, 2] has more elements than size_t can count");
  CHECK_THROWS_AS(random::normal<float>(shape{std::size_t{1} << 32, std::size_t{1} << 32, std::size_t{0}}, 1),
                  shape_error);
  tensor<std::int32_t, cpu> labels{0, 1};
  CHECK_THROWS_WITH(one_hot<float>(labels, std::size_t{1} << 63),
                    "locus: col_index: the shape [2, 9223372036854775808] has more elements than size_t can count");
  CHECK(on<cpu>(sum(col_index(shape{std::size_t{0}, std::size_t{1} << 40}))).item() == 0);
}

TEST_CASE("counter-based random numbers are the same on every device and have the right moments", "[ops][random]") {
  const std::size_t n = 100000;
  const auto u = on<cpu>(random::uniform<float>(shape{n}, 7, -1.0, 3.0)).to_vector();
  const auto g = on<cpu>(random::normal<double>(shape{n}, 7, 2.0, 0.5)).to_vector();
#if LOCUS_HAS_GPUS
  CHECK(on<gpu<0>>(random::uniform<float>(shape{n}, 7, -1.0, 3.0)).to_vector() == u);
  const auto g1 = on<gpu<1>>(random::normal<double>(shape{n}, 7, 2.0, 0.5)).to_vector();
#  if LOCUS_HAS_CUDA
  // CUDA's double log and cos may differ from the host's libm in the last bit (seen on an H200),
  // and near a zero of cos that is a large relative difference: compared absolutely (values ~2).
  REQUIRE(g1.size() == g.size());
  std::size_t far = 0;
  for (std::size_t i = 0; i < n; ++i) far += std::abs(g1[i] - g[i]) > 1e-12;
  CHECK(far == 0);
#  else
  CHECK(g1 == g);
#  endif
#endif
  CHECK(on<cpu>(random::uniform<float>(shape{n}, 7, -1.0, 3.0)).to_vector() == u);  // deterministic
  CHECK(on<cpu>(random::uniform<float>(shape{n}, 8, -1.0, 3.0)).to_vector() != u);  // the seed matters
  double su = 0, sg = 0, sg2 = 0;
  for (float x : u) {
    REQUIRE(x >= -1.f);
    REQUIRE(x < 3.f);
    su += x;
  }
  for (double x : g) {
    sg += x;
    sg2 += x * x;
  }
  const double mg = sg / n;
  CHECK(std::abs(su / n - 1.0) < 0.02);
  CHECK(std::abs(mg - 2.0) < 0.01);
  CHECK(std::abs(std::sqrt(sg2 / n - mg * mg) - 0.5) < 0.01);
  auto w = on<cpu>(random::glorot_uniform<float>(shape{784, 256}, 1));
  const float limit = static_cast<float>(std::sqrt(6.0 / (784 + 256)));
  const auto hw = w.to_vector();
  CHECK(*std::max_element(hw.begin(), hw.end()) <= limit);
  CHECK(*std::min_element(hw.begin(), hw.end()) >= -limit);
  CHECK(*std::max_element(hw.begin(), hw.end()) > 0.99f * limit);
}
