// conv2d, max_pool2d, avg_pool2d (ops/conv.hpp, ad/conv.hpp) and the CNN layers: values against
// direct loops in double, gradients against central finite differences (float and double, the
// cpu and an emulated GPU; stride > 1, padding, dilation, odd sizes, batch 1, one channel, the
// kernel as large as the padded input, overlapping pooling windows), fusion and the placement log,
// bad shapes and options refused before anything is written, and a small CNN trained end to end.
#include "../common/test_support.hpp"

#include <locus/ad/ad.hpp>
#include <locus/train/layers.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <utility>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

using namespace locus;
using locus_test::float_cases;
using locus_test::random_values;

namespace {

struct geometry_case {
  shape<4> x, w;
  conv2d_options o;
};

/// The convolution by its definition, in double: y[n, k, i, j] = b[k] + sum over c, r, s.
std::vector<double> conv_reference(const shape<4>& xs, const std::vector<double>& x, const shape<4>& ws,
                                   const std::vector<double>& w, const std::vector<double>& b, const conv2d_options& o,
                                   shape<4>& ys) {
  const auto sh = std::size_t(o.stride.h), sw = std::size_t(o.stride.w), ph = std::size_t(o.padding.h),
             pw = std::size_t(o.padding.w), dh = std::size_t(o.dilation.h), dw = std::size_t(o.dilation.w);
  const std::size_t oh = (xs[2] + 2 * ph - dh * (ws[2] - 1) - 1) / sh + 1, ow = (xs[3] + 2 * pw - dw * (ws[3] - 1) - 1) / sw + 1;
  ys = shape{xs[0], ws[0], oh, ow};
  std::vector<double> y(ys.size(), 0.0);
  for (std::size_t n = 0; n < xs[0]; ++n)
    for (std::size_t k = 0; k < ws[0]; ++k)
      for (std::size_t i = 0; i < oh; ++i)
        for (std::size_t j = 0; j < ow; ++j) {
          double acc = b.empty() ? 0.0 : b[k];
          for (std::size_t c = 0; c < xs[1]; ++c)
            for (std::size_t r = 0; r < ws[2]; ++r)
              for (std::size_t s = 0; s < ws[3]; ++s) {
                const auto yy = std::int64_t(i * sh + r * dh) - std::int64_t(ph);
                const auto xx = std::int64_t(j * sw + s * dw) - std::int64_t(pw);
                if (yy < 0 || xx < 0 || yy >= std::int64_t(xs[2]) || xx >= std::int64_t(xs[3])) continue;
                acc += x[((n * xs[1] + c) * xs[2] + std::size_t(yy)) * xs[3] + std::size_t(xx)] *
                       w[((k * ws[1] + c) * ws[2] + r) * ws[3] + s];
              }
          y[((n * ws[0] + k) * oh + i) * ow + j] = acc;
        }
  return y;
}

/// Pooling by its definition, in double.
std::vector<double> pool_reference(const shape<4>& xs, const std::vector<double>& x, std::size_t win, std::size_t stride,
                                   bool is_max, shape<4>& ys) {
  const std::size_t oh = (xs[2] - win) / stride + 1, ow = (xs[3] - win) / stride + 1;
  ys = shape{xs[0], xs[1], oh, ow};
  std::vector<double> y;
  for (std::size_t p = 0; p < xs[0] * xs[1]; ++p)
    for (std::size_t i = 0; i < oh; ++i)
      for (std::size_t j = 0; j < ow; ++j) {
        double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
        for (std::size_t r = 0; r < win; ++r)
          for (std::size_t s = 0; s < win; ++s) {
            const double v = x[(p * xs[2] + i * stride + r) * xs[3] + j * stride + s];
            acc = is_max ? std::max(acc, v) : acc + v;
          }
        y.push_back(is_max ? acc : acc / double(win * win));
      }
  return y;
}

template <class T>
std::vector<double> widen(const std::vector<T>& v) {
  return {v.begin(), v.end()};
}

const std::vector<geometry_case> geometries = {
    {shape{2, 3, 7, 6}, shape{4, 3, 3, 3}, {}},                                            // odd sizes, no padding
    {shape{2, 2, 7, 7}, shape{3, 2, 3, 3}, {.stride = 2, .padding = 1}},                   // stride and padding
    {shape{1, 1, 6, 5}, shape{2, 1, 2, 3}, {.stride = {1, 2}, .padding = {1, 0}}},         // per-axis, batch 1, one channel
    {shape{2, 2, 7, 7}, shape{2, 2, 3, 3}, {.padding = 2, .dilation = 2}},                 // dilation
    {shape{2, 2, 4, 4}, shape{3, 2, 6, 6}, {.padding = 1}},                                // kernel = padded input
    {shape{1, 2, 3, 4}, shape{2, 2, 2, 2}, {.stride = {2, 3}, .padding = {3, 2}}},         // padding past the kernel: whole rows and runs of zeros
};

/// Values and gradients of conv2d against the definition and finite differences.
template <class D, class T>
void conv_case(const geometry_case& gc) {
  INFO("x " << gc.x.str() << ", w " << gc.w.str() << ", stride " << gc.o.stride.str() << ", padding "
            << gc.o.padding.str() << ", dilation " << gc.o.dilation.str());
  auto xv = random_values<T>(gc.x.size(), -1, 1, 1);
  auto wv = random_values<T>(gc.w.size(), -1, 1, 2);
  auto bv = random_values<T>(gc.w[0], -1, 1, 3);
  tensor<T, D, 4> x(gc.x, xv), w(gc.w, wv);
  tensor<T, D, 1> b(shape{gc.w[0]}, bv);
  shape<4> ys;
  const auto ref = conv_reference(gc.x, widen(xv), gc.w, widen(wv), widen(bv), gc.o, ys);
  tensor<T, D, 4> y = conv2d(x, w, b, gc.o);
  REQUIRE(y.shape() == ys);
  CHECK(locus_test::all_close(y.to_vector(), ref, std::is_same_v<T, float> ? 1e-5 : 1e-12));
  // Without a bias, and staged inside an expression: relu(conv2d(x, w) + 1).
  const auto ref0 = conv_reference(gc.x, widen(xv), gc.w, widen(wv), {}, gc.o, ys);
  tensor<T, D, 4> z = relu(conv2d(x, w, gc.o) + T(1));
  std::vector<double> want(ref0.size());
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = std::max(0.0, ref0[i] + 1.0);
  CHECK(locus_test::all_close(z.to_vector(), want, std::is_same_v<T, float> ? 1e-5 : 1e-12));

  // Gradients of sum(conv2d(x, w, b) * k) (k fixed, so every output has its own weight).
  const tensor<T, D, 4> k(ys, random_values<T>(ys.size(), -1, 1, 4));
  const auto f = [&](const auto& p) {
    const auto& [X, W, B] = p;
    return sum(conv2d(X, W, B, gc.o) * k);
  };
  const auto r = ad::value_and_grad(f, std::tie(x, w, b));
  const double h = std::is_same_v<T, float> ? 1e-2 : 1e-6, tol = std::is_same_v<T, float> ? 2e-2 : 1e-6;
  const auto check = [&](auto& p, const auto& grad, const char* name) {
    const auto got = grad.to_vector();
    auto host = p.to_vector();
    for (std::size_t i = 0; i < host.size(); ++i) {
      const T orig = host[i];
      const auto loss_with = [&](T v) {
        host[i] = v;
        p = std::remove_cvref_t<decltype(p)>(p.shape(), host);
        return double(ad::value_and_grad(f, std::tie(x, w, b)).loss.item());
      };
      const double fd = (loss_with(T(orig + h)) - loss_with(T(orig - h))) / (2 * h);
      host[i] = orig;
      p = std::remove_cvref_t<decltype(p)>(p.shape(), host);
      INFO(name << " element " << i << ": ad " << double(got[i]) << ", finite differences " << fd);
      CHECK(std::abs(double(got[i]) - fd) <= tol * std::max(1.0, std::abs(fd)));
    }
  };
  check(x, std::get<0>(r.grad), "dx");
  check(w, std::get<1>(r.grad), "dw");
  check(b, std::get<2>(r.grad), "db");
}

/// Distinct values 0.1 apart (a finite-difference step cannot change which element is a maximum).
template <class T>
std::vector<T> distinct_values(std::size_t n, std::uint32_t seed) {
  std::vector<T> v(n);
  std::iota(v.begin(), v.end(), T(0));
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  for (auto& e : v) e = e * T(0.1) - T(n) * T(0.05);
  return v;
}

template <class D, class T>
void pool_case(std::size_t win, std::size_t stride) {
  INFO("window " << win << ", stride " << stride);
  const shape<4> xs{2, 2, 7, 6};
  const auto xv = distinct_values<T>(xs.size(), 5);
  tensor<T, D, 4> x(xs, xv);
  shape<4> ys;
  for (const bool is_max : {true, false}) {
    const auto ref = pool_reference(xs, widen(xv), win, stride, is_max, ys);
    tensor<T, D, 4> y = is_max ? on<D>(max_pool2d(x, int(win), int(stride))) : on<D>(avg_pool2d(x, int(win), int(stride)));
    REQUIRE(y.shape() == ys);
    CHECK(locus_test::all_close(y.to_vector(), ref, std::is_same_v<T, float> ? 1e-6 : 1e-13));
  }
  const tensor<T, D, 4> k(ys, random_values<T>(ys.size(), -1, 1, 6));
  const auto fmax = [&](const auto& X) { return sum(max_pool2d(X * T(1), int(win), int(stride)) * k); };
  const auto favg = [&](const auto& X) { return sum(avg_pool2d(X, int(win), int(stride)) * k); };
  const double h = std::is_same_v<T, float> ? 1e-2 : 1e-6, tol = std::is_same_v<T, float> ? 2e-2 : 1e-6;
  const auto check = [&](const auto& f, const char* name) {
    const auto got = ad::grad(f, x).to_vector();
    auto host = xv;
    for (std::size_t i = 0; i < host.size(); ++i) {
      const auto loss_with = [&](T v) {
        host[i] = v;
        x = tensor<T, D, 4>(xs, host);
        return double(ad::value_and_grad(f, x).loss.item());
      };
      const double fd = (loss_with(T(xv[i] + h)) - loss_with(T(xv[i] - h))) / (2 * h);
      host[i] = xv[i];
      x = tensor<T, D, 4>(xs, host);
      INFO(name << " element " << i << ": ad " << double(got[i]) << ", finite differences " << fd);
      CHECK(std::abs(double(got[i]) - fd) <= tol * std::max(1.0, std::abs(fd)));
    }
  };
  check(fmax, "max_pool2d");
  check(favg, "avg_pool2d");
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("conv2d: values and gradients against the definition and finite differences", "[conv]",
                        float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  for (const auto& gc : geometries) conv_case<D, T>(gc);
}

TEMPLATE_LIST_TEST_CASE("max_pool2d and avg_pool2d: values and gradients, windows apart and overlapping", "[conv]",
                        float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  pool_case<D, T>(2, 2);  // the host's 2x2 loops; an odd height: the last row in no window
  pool_case<D, T>(3, 3);  // windows that tile, not 2x2: the host's general tiled backward, a row left over
  pool_case<D, T>(3, 2);  // overlapping windows: a maximum may collect several gradients
  pool_case<D, T>(6, 1);  // the window as wide as the input: one column of windows
}

TEST_CASE("max_pool2d: ties go to the first maximum, NaN is the maximum", "[conv]") {
  tensor<double, cpu, 4> x(shape{1, 1, 2, 4}, std::vector<double>{1, 1, 2, std::nan(""), 1, 0, 5, 3});
  tensor<double, cpu, 4> y = max_pool2d(x, 2);
  CHECK(y.to_vector()[0] == 1.0);
  CHECK(std::isnan(y.to_vector()[1]));
  const auto g = ad::grad([](const auto& X) { return sum(max_pool2d(X, 2)); }, x).to_vector();
  CHECK(g == std::vector<double>{1, 0, 0, 1, 0, 0, 0, 0});
}

TEST_CASE("max_pool2d: rows wider than the host's block of windows, ties, signed zeros and NaN anywhere", "[conv]") {
  // The host sweeps a row of windows tap by tap with selects (blocks of 64 windows); the rule is
  // still window by window: the first maximum in row-major order, NaN the maximum once seen.
  const double values[] = {-1.0, 0.0, -0.0, 1.0, std::nan(""), 1.0, 0.0};
  for (const auto& ws : {std::pair<std::size_t, std::size_t>{2, 2}, {3, 3}, {3, 2}, {2, 1}}) {
    const std::size_t window = ws.first, stride = ws.second;  // (not a structured binding: clang 14 cannot capture one)
    INFO("window " << window << ", stride " << stride);
    const std::size_t h = 5, w = 2 * 64 * 2 + 7;
    std::vector<double> xv(2 * h * w);
    for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = values[(i * 7919 + i / 5) % 7];
    tensor<double, cpu, 4> x(shape{1, 2, h, w}, xv);
    const auto y = on<cpu>(max_pool2d(x, {std::int64_t(window), std::int64_t(window)},
                                      {std::int64_t(stride), std::int64_t(stride)})).to_vector();
    const auto g = ad::grad([&](const auto& X) {
                     return sum(max_pool2d(X, {std::int64_t(window), std::int64_t(window)},
                                           {std::int64_t(stride), std::int64_t(stride)}));
                   }, x).to_vector();
    const std::size_t oh = (h - window) / stride + 1, ow = (w - window) / stride + 1;
    REQUIRE(y.size() == 2 * oh * ow);
    std::vector<double> expect_g(xv.size(), 0.0);
    std::size_t mismatches = 0;
    for (std::size_t c = 0; c < 2; ++c)
      for (std::size_t oy = 0; oy < oh; ++oy)
        for (std::size_t ox = 0; ox < ow; ++ox) {
          std::size_t best = c * h * w + oy * stride * w + ox * stride;
          for (std::size_t r = 0; r < window; ++r)
            for (std::size_t q = 0; q < window; ++q) {
              const std::size_t at = c * h * w + (oy * stride + r) * w + ox * stride + q;
              const double m = xv[best], v = xv[at];
              if (m == m && (v != v || v > m)) best = at;
            }
          expect_g[best] += 1.0;
          const double got = y[(c * oh + oy) * ow + ox];
          if (std::bit_cast<std::uint64_t>(got) != std::bit_cast<std::uint64_t>(xv[best])) ++mismatches;
        }
    CHECK(mismatches == 0);
    CHECK(g == expect_g);
  }
}

TEST_CASE("conv2d: one im2col, one product and one writer, logged as Conv2D, fused into its consumer", "[conv]") {
  tensor<float, gpu<0>, 4> x(shape{2, 3, 8, 8}, 0.5f), w(shape{4, 3, 3, 3}, 0.25f);
  tensor<float, gpu<0>, 1> b(shape{4}, 1.f);
  locus_test::log_capture log;
  const auto before = kernel_launches(id_of<gpu<0>>);
  auto y = on<gpu<0>>(relu(conv2d(x, w, b, {.padding = 1}) - 100.f));
  CHECK(kernel_launches(id_of<gpu<0>>) - before == 4);  // im2col, GEMM, NCHW + bias, relu
  CHECK(y.shape() == shape{2, 4, 8, 8});
  CHECK(y.to_vector() == std::vector<float>(y.size(), 0.f));
  CHECK(log.contains("conv2d: (Conv2D): " + locus_test::logged(id_of<gpu<0>>)));
  auto p = on<gpu<0>>(max_pool2d(x, 2) + avg_pool2d(x, 2));
  CHECK(log.contains("max_pool2d: (MaxPool)"));
  CHECK(log.contains("avg_pool2d: (AvgPool)"));
  CHECK(p.to_vector() == std::vector<float>(p.size(), 1.f));
  // An empty batch gives an empty result.
  tensor<float, gpu<0>, 4> none(shape{0, 3, 8, 8});
  auto e = on<gpu<0>>(conv2d(none, w, {.padding = 1}));
  CHECK(e.shape() == shape{0, 4, 8, 8});
}

TEST_CASE("conv2d and pooling: bad shapes and options are named, nothing is written", "[conv]") {
  tensor<float, cpu, 4> x(shape{1, 2, 4, 4}, 1.f), w(shape{3, 2, 3, 3}, 1.f);
  tensor<float, cpu, 4> out(shape{1, 3, 2, 2}, 7.f);
  const auto untouched = [&] { return out.to_vector() == std::vector<float>(out.size(), 7.f); };
  const auto msg = [&](auto&& f) {
    try {
      f();
    } catch (const error& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  CHECK_THROWS_AS(out = conv2d(x, tensor<float, cpu, 4>(shape{3, 2, 6, 6}, 1.f)), shape_error);
  CHECK(msg([&] { out = conv2d(x, tensor<float, cpu, 4>(shape{3, 2, 5, 5}, 1.f)); })
            .find("a window of 5 along the height does not fit the input's 4") != std::string::npos);
  CHECK(msg([&] { out = conv2d(x, tensor<float, cpu, 4>(shape{3, 1, 3, 3}, 1.f)); })
            .find("x has 2 channels, w's filters take 1") != std::string::npos);
  CHECK_THROWS_AS(out = conv2d(x, w, {.stride = 0}), config_error);
  CHECK(msg([&] { out = conv2d(x, w, {.stride = {1, 0}}); }).find("stride 1x0") != std::string::npos);
  CHECK(msg([&] { out = conv2d(x, w, {.padding = -1}); }).find("padding -1 (a padding is 0 or more") != std::string::npos);
  CHECK_THROWS_AS(out = conv2d(x, w, {.dilation = 0}), config_error);
  CHECK(msg([&] { out = conv2d(x, w, tensor<float, cpu, 1>(shape{2}, 0.f)); })
            .find("a bias of shape [2] for filters of shape [3, 2, 3, 3]") != std::string::npos);
  CHECK(msg([&] { (void)on<cpu>(max_pool2d(x, 5)); }).find("max_pool2d: x of shape [1, 2, 4, 4]: a window of 5") !=
        std::string::npos);
  CHECK_THROWS_AS((void)on<cpu>(avg_pool2d(x, 2, 0)), config_error);
  CHECK(untouched());
  // The same through locus::ad, before any step is recorded.
  CHECK_THROWS_AS(ad::grad([&](const auto& W) { return sum(conv2d(x, W, {.padding = -2})); }, w), config_error);
}

TEST_CASE("CNN layers: shapes followed when the model is built, a small network trained on two devices", "[conv][train]") {
  namespace nn = train::nn;
  const auto err = [](auto&& make) {
    try {
      make();
    } catch (const shape_error& e) {
      return std::string(e.what());
    }
    return std::string("no shape_error");
  };
  CHECK(err([] { train::sequential s{nn::conv2d(1, 2, 3), nn::flatten, nn::dense(8, 2)}; })
            .find("layer 0 (conv2d(1, 2, 3)): its input is not an image") != std::string::npos);
  CHECK(err([] { train::sequential s{nn::reshape(shape{1, 6, 6}), nn::conv2d(3, 2, 3), nn::flatten, nn::dense(32, 2)}; })
            .find("layer 1 (conv2d(3, 2, 3)) on images [1, 6, 6]: locus: conv2d") != std::string::npos);
  CHECK(err([] { train::sequential s{nn::reshape(shape{1, 6, 6}), nn::conv2d(1, 2, 3), nn::dense(32, 2)}; })
            .find("layer 2 (dense(32, 2)) after a layer of images [2, 4, 4] per example: put nn::flatten before it") !=
        std::string::npos);
  CHECK(err([] { train::sequential s{nn::reshape(shape{1, 6, 6}), nn::conv2d(1, 2, 3), nn::flatten, nn::dense(30, 2)}; })
            .find("layer 3 is dense(30, 2) after a layer of 32 outputs") != std::string::npos);
  CHECK(err([] { train::sequential s{nn::reshape(shape{1, 4, 4}), nn::max_pool2d(5), nn::flatten, nn::dense(1, 2)}; })
            .find("layer 1 (max_pool2d(5, stride 5)) on images [1, 4, 4]") != std::string::npos);
  CHECK_THROWS_AS(nn::conv2d(1, 2, 0), config_error);

  // Two classes: a bright top half against a bright bottom half, 6x6 images.
  train::sequential cnn{nn::reshape(shape{1, 6, 6}), nn::conv2d(1, 4, 3, {.padding = 1}), nn::relu, nn::max_pool2d(2),
                        nn::conv2d(4, 4, {2, 3}), nn::tanh, nn::avg_pool2d({2, 1}, 1), nn::flatten, nn::dense(4, 2)};
  CHECK(cnn.classes() == 2);
  const std::size_t n = 32;
  std::vector<float> xs(n * 36);
  std::vector<std::int32_t> ys(n);
  const auto noise = random_values<float>(xs.size(), 0, 0.3, 7);
  for (std::size_t i = 0; i < n; ++i) {
    ys[i] = std::int32_t(i % 2);
    for (std::size_t p = 0; p < 36; ++p) xs[i * 36 + p] = noise[i * 36 + p] + ((p < 18) == (ys[i] == 0) ? 1.f : 0.f);
  }
  auto train_on = [&]<class D>(D) {
    const tensor<float, D, 2> x(shape{n, 36}, xs);
    const tensor<std::int32_t, D> y(shape{n}, ys);
    auto p = cnn.template init<D>();
    double first = 0, last = 0;
    for (int step = 0; step < 40; ++step) {
      auto r = cnn.loss_and_grad(p, x, y, 0);
      (step == 0 ? first : last) = double(r.loss.item());
      // Plain SGD: each parameter minus 0.2 times its gradient (both visited depth-first).
      std::vector<const float*> grads;
      r.grad.for_each([&](auto g) { grads.push_back(g.data()); });
      std::size_t i = 0;
      p.for_each([&](auto v) {
        const tensor_view<const float, D, decltype(v)::rank> g(grads[i++], v.shape());
        v = v - 0.2f * g;
      });
    }
    INFO("loss " << first << " -> " << last);
    CHECK(last < 0.5 * first);
    const auto pred = to<cpu>(cnn.predict(p, x)).to_vector();
    std::size_t right = 0;
    for (std::size_t i = 0; i < n; ++i) right += pred[i] == ys[i] ? 1 : 0;
    CHECK(right == n);
    return to<cpu>(cnn.logits(p, x)).to_vector();
  };
  const auto on_cpu = train_on(cpu{});
  const auto on_gpu = train_on(gpu<1>{});
  CHECK(locus_test::all_close(on_gpu, widen(on_cpu), 1e-4));
}

TEST_CASE("conv2d and pooling: sizes past 2^62 and results past a size_t are refused when built", "[conv]") {
  const tensor<float, cpu, 4> x(shape{1, 1, 5, 5}, 1.f), w1(shape{1, 1, 1, 1}, 1.f), w5(shape{1, 1, 5, 5}, 1.f);
  constexpr std::int64_t big = std::numeric_limits<std::int64_t>::max();
  CHECK_THROWS_WITH((void)conv2d(x, w1, {.padding = big}),
                    Catch::Matchers::Contains("a padding of 9223372036854775807 along the height (past 2^62)"));
  CHECK_THROWS_WITH((void)conv2d(x, w5, {.dilation = std::int64_t(1) << 62}),
                    Catch::Matchers::Contains("a window of 5 dilated by 4611686018427387904 along the height spans more"));
  CHECK_THROWS_WITH((void)conv2d(x, w1, {.padding = std::int64_t(1) << 62}),
                    Catch::Matchers::Contains("has more elements than a size_t counts"));
  // Pooling's stride written as {height, width}, as the window is.
  tensor<float, cpu, 4> p = max_pool2d(x, {2, 3}, {1, 2});
  CHECK(p.shape() == shape{1, 1, 4, 2});
  CHECK(train::nn::avg_pool2d({2, 2}, {1, 1}).stride.h == 1);
}

TEST_CASE("conv2d and pooling: the GPUs' element kernels, run on the host, give the definition's values and gradients",
          "[conv]") {
  // CUDA runs other kernels than host-run devices (one thread per element, gathers instead of
  // per-plane loops); CI has no GPU, so they run here on the cpu.
  struct element_kernels {
    element_kernels() { locus::detail::conv_element_kernels_on_host = true; }
    ~element_kernels() { locus::detail::conv_element_kernels_on_host = false; }
  } guard;
  for (const auto& gc : geometries) conv_case<cpu, double>(gc);
  pool_case<cpu, double>(2, 2);
  pool_case<cpu, double>(3, 2);
}
