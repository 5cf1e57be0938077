// Reverse-mode differentiation (locus/ad): every differentiable operation against central finite
// differences in double precision, in float and double, on the cpu and on emulated GPUs; kernel
// counts of the fused backward; placement of gradients; errors.
#include "../common/test_support.hpp"

#include <locus/ad/ad.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <vector>

using namespace locus;
using locus_test::on_device;
// Float on the cpu and on a GPU, double on the cpu: the derivative rules and the backward's
// kernels are the same templates for every (type, device) pair, and each pair costs a compile of
// this file's largest expressions (the largest file of every CI stage); double on a GPU adds the
// least (the finite-difference check in double runs on the cpu, float's on both device kinds).
// The CUDA build (compiled in CI, run where a GPU is) checks the GPU pair alone: the cpu pairs are
// the same host code, compiled and run by every host stage (half of this file's nvcc time).
#if LOCUS_HAS_CUDA
using float_cases = std::tuple<on_device<gpu<1>, float>>;
#elif LOCUS_HAS_GPUS
using float_cases = std::tuple<on_device<cpu, float>, on_device<gpu<1>, float>, on_device<cpu, double>>;
#else
using float_cases = std::tuple<on_device<cpu, float>, on_device<cpu, double>>;
#endif
using locus_test::random_values;

namespace {

/// A rank-R tensor on D from host values.
template <class T, class D, int R>
tensor<T, D, R> make(shape<R> s, const std::vector<T>& v) {
  return tensor<T, D, R>(s, v);
}

/// f's loss at params, as a double (through ad: the same code path the gradient takes).
template <class F, class P, class... A>
double loss_at(F& f, const P& p, const A&... a) {
  return double(ad::value_and_grad(f, p, a...).loss.item());
}

/// Compares ad's gradient of f with central differences (computed in the parameters' type T,
/// step h), parameter by parameter.
template <class T, class F, class... Ts, class... A>
void check_gradients(F f, std::tuple<Ts&...> params, double tol, const A&... args) {
  auto g = ad::value_and_grad(f, params, args...).grad;
  const double h = std::is_same_v<T, float> ? 1e-2 : 1e-6;
  auto one = [&](auto& p, const auto& gp) {
    const auto got = gp.to_vector();
    auto host = p.to_vector();
    REQUIRE(got.size() == host.size());
    for (std::size_t i = 0; i < host.size(); ++i) {
      const T orig = host[i];
      host[i] = static_cast<T>(orig + h);
      p = std::remove_cvref_t<decltype(p)>(p.shape(), host);
      const double up = loss_at(f, params, args...);
      host[i] = static_cast<T>(orig - h);
      p = std::remove_cvref_t<decltype(p)>(p.shape(), host);
      const double down = loss_at(f, params, args...);
      host[i] = orig;
      p = std::remove_cvref_t<decltype(p)>(p.shape(), host);
      const double fd = (up - down) / (2 * h);
      INFO("element " << i << ": ad " << double(got[i]) << ", finite differences " << fd);
      CHECK(std::abs(double(got[i]) - fd) <= tol * std::max(1.0, std::abs(fd)));
    }
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (one(std::get<I>(params), std::get<I>(g)), ...);
  }(std::index_sequence_for<Ts...>{});
}

template <class T>
constexpr double fd_tol() {
  return std::is_same_v<T, float> ? 2e-2 : 1e-6;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("ad: unary functions against finite differences", "[ad]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  auto a = make<T, D, 1>(shape{6}, random_values<T>(6, 0.3, 1.7, 1));
  auto b = make<T, D, 1>(shape{6}, random_values<T>(6, -1.5, 1.5, 2));
  // Every unary operation, chained, in one expression: one loss, one backward.
  auto f = [](auto& p, int) {
    auto& [x, y] = p;
    return sum(exp(x) * T(0.5) + log(x) + sqrt(x) + tanh(y) + sigmoid(y) + relu(y) + abs(y) - (-x) * y);
  };
  check_gradients<T>(f, std::tie(a, b), fd_tol<T>(), 0);
}

TEMPLATE_LIST_TEST_CASE("ad: binary operations, where, cast and constants", "[ad]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  auto a = make<T, D, 1>(shape{5}, random_values<T>(5, 0.5, 2.0, 3));
  auto b = make<T, D, 1>(shape{5}, random_values<T>(5, 0.5, 2.0, 4));
  const auto c = make<T, D, 1>(shape{5}, random_values<T>(5, -1.0, 1.0, 5));  // a constant
  auto f = [](auto& p, const tensor<T, D, 1>& k) {
    auto& [x, y] = p;
    return sum(x / y + pow(x, y) + pow(x, T(2)) + min(x, y * T(1.1)) + max(x, k) + where(k > T(0), x * y, T(3) - x) +
               cast<T>(cast<double>(x) * 2.0) * k - x * k);
  };
  check_gradients<T>(f, std::tie(a, b), fd_tol<T>(), c);
}

TEMPLATE_LIST_TEST_CASE("ad: broadcasts: a row, a column, a scalar, and one var used twice", "[ad]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  auto m = make<T, D, 2>(shape{3, 4}, random_values<T>(12, -1, 1, 6));
  auto row = make<T, D, 1>(shape{4}, random_values<T>(4, -1, 1, 7));
  auto column = make<T, D, 1>(shape{3}, random_values<T>(3, -1, 1, 8));
  auto s = make<T, D, 0>(shape<0>{}, {T(0.7)});
  auto f = [](auto& p, int) {
    auto& [x, r, c, k] = p;
    // r is read as a row and as a column of another expression; x twice.
    return sum(tanh(x * r + col(c * k)) * x) + sum(r * r) * k;
  };
  check_gradients<T>(f, std::tie(m, row, column, s), fd_tol<T>(), 0);
  auto square = make<T, D, 2>(shape{4, 4}, random_values<T>(16, -1, 1, 9));
  auto g = [](auto& p, int) {
    auto& [x, r] = p;
    return sum(sigmoid(x * r + col(r)));  // r as a row and as a column of the same expression
  };
  check_gradients<T>(g, std::tie(square, row), fd_tol<T>(), 0);
}

TEMPLATE_LIST_TEST_CASE("ad: a gradient handed on as it is (a var added, or on the left of a subtraction)",
                        "[ad]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  auto w = make<T, D, 2>(shape{3, 4}, random_values<T>(12, -1, 1, 20));
  auto v = make<T, D, 2>(shape{3, 4}, random_values<T>(12, -1, 1, 21));
  auto b = make<T, D, 1>(shape{4}, random_values<T>(4, -1, 1, 22));
  auto s = make<T, D, 0>(shape<0>{}, {T(0.3)});
  auto f = [](auto& p, int) {
    auto& [x, y, r, k] = p;
    auto h = ad::evaluate(x * y);                  // a var: the steps below read it directly
    auto passed = ad::evaluate(h - col(sum<1>(y)));  // h's gradient is passed's, handed on
    auto right = ad::evaluate(r - h);              // h on the right: negated, not handed on
    auto twice = ad::evaluate(h + h * k);          // h twice: its derivative is 1 + k
    auto param = ad::evaluate(x + y);              // a parameter handed the gradient directly
    auto scalar = ad::evaluate(k + r);             // k (rank 0) is summed, not handed on
    return sum(exp(passed) * T(0.5)) + sum(tanh(right)) + sum(twice * twice) + sum(sigmoid(param)) +
           sum(scalar * scalar) + sum(x * x);  // x's gradient also reaches it from elsewhere
  };
  check_gradients<T>(f, std::tie(w, v, b, s), fd_tol<T>(), 0);
}

TEMPLATE_LIST_TEST_CASE("ad: sums and means, whole and along each axis", "[ad]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  auto m = make<T, D, 2>(shape{3, 5}, random_values<T>(15, -1, 1, 10));
  auto f = [](auto& p, int) {
    auto& [x] = p;
    auto rows = sum<1>(x * x);      // [3]
    auto cols = mean<0>(exp(x));    // [5]
    return sum(rows * rows) + mean(cols * cols) + mean(x) * T(3) + sum(mean<1>(x) * sum<1>(x));
  };
  auto& mr = m;
  check_gradients<T>(f, std::tie(mr), fd_tol<T>(), 0);
}

TEMPLATE_LIST_TEST_CASE("ad: matmul with every transposition, and softmax cross-entropy", "[ad]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  auto a = make<T, D, 2>(shape{4, 3}, random_values<T>(12, -1, 1, 11));
  auto b = make<T, D, 2>(shape{3, 5}, random_values<T>(15, -1, 1, 12));
  auto bt = make<T, D, 2>(shape{5, 3}, random_values<T>(15, -1, 1, 13));
  auto at = make<T, D, 2>(shape{3, 4}, random_values<T>(12, -1, 1, 14));
  auto f = [](auto& p, int) {
    auto& [A, B, Bt, At] = p;
    return sum(matmul(A, B) * matmul(A, transpose(Bt))) + sum(tanh(matmul(transpose(At), B))) +
           sum(matmul(transpose(B), transpose(A)) * matmul(Bt, At));
  };
  check_gradients<T>(f, std::tie(a, b, bt, at), fd_tol<T>(), 0);

  const tensor<std::int32_t, D> labels = to<D>(tensor<std::int32_t, cpu>{2, 0, 4, 1});
  const auto x = make<T, D, 2>(shape{4, 3}, random_values<T>(12, -1, 1, 15));
  auto bias = make<T, D, 1>(shape{5}, random_values<T>(5, -1, 1, 16));
  auto loss = [](auto& p, const tensor<T, D, 2>& in, const tensor<std::int32_t, D>& y) {
    auto& [W, c] = p;
    return softmax_cross_entropy(matmul(in, W) + c, y) * T(2) + T(0.01) * sum(W * W);
  };
  check_gradients<T>(loss, std::tie(b, bias), fd_tol<T>(), x, labels);
}

TEST_CASE("ad: backward twice adds to the parameters' gradients (a parameter as the loss too), and is refused "
          "through softmax_cross_entropy",
          "[ad]") {
  tensor<double, cpu, 1> w{1.0, -2.0};
  tensor<double, cpu, 0> k(shape<0>{}, 3.0);
  auto W = ad::parameter(w);
  auto K = ad::parameter(k);
  const auto loss = ad::evaluate(sum(W * W) * K);  // a step whose backward reads the seed
  ad::backward(loss);
  CHECK(W.grad().to_vector() == std::vector<double>{6.0, -12.0});
  CHECK(K.grad().item() == 5.0);
  ad::backward(loss);  // the steps' own gradients were freed; the parameters' add up
  CHECK(W.grad().to_vector() == std::vector<double>{12.0, -24.0});
  CHECK(K.grad().item() == 10.0);
  // softmax cross-entropy hands its kept gradient on: a second backward through it is refused,
  // before any gradient changes.
  tensor<double, cpu, 2> z{{1.0, 2.0}, {0.5, -1.0}};
  tensor<std::int32_t, cpu> labels{1, 0};
  auto Z = ad::parameter(z);
  const auto ce = softmax_cross_entropy(Z * K, labels);
  ad::backward(ce);
  const auto dz = Z.grad().to_vector();
  const double dk = K.grad().item();
  CHECK(dk != 10.0);
  CHECK_THROWS_WITH(ad::backward(ce), "locus: ad: backward through softmax_cross_entropy a second time: its kept "
                                      "gradient was handed on by the first; compute the loss again");
  CHECK(Z.grad().to_vector() == dz);
  CHECK(K.grad().item() == dk);
  // Also when the spent loss is not the root: the refusal comes before the other terms' gradients
  // (sum(K * K)'s, which would run first) are added.
  const auto again = ad::evaluate(ce * 1.0 + sum(K * K));
  CHECK_THROWS_WITH(ad::backward(again), "locus: ad: backward through softmax_cross_entropy a second time: its kept "
                                         "gradient was handed on by the first; compute the loss again");
  CHECK(Z.grad().to_vector() == dz);
  CHECK(K.grad().item() == dk);
  CHECK(K.take_grad().item() == dk);
  ad::backward(K);  // the loss is the parameter itself: d K / d K = 1, added
  CHECK(K.grad().item() == 1.0);
  ad::backward(K);
  CHECK(K.grad().item() == 2.0);
}

TEST_CASE("ad: a gradient is a tensor on its parameter's device, of its parameter's type", "[ad]") {
#if LOCUS_HAS_GPUS
  using D = gpu<1>;
#else
  using D = cpu;
#endif
  tensor<float, D, 2> w = to<D>(tensor<float, cpu, 2>{{1.f, 2.f}, {3.f, 4.f}});
  tensor<float, D, 1> b = to<D>(tensor<float, cpu>{0.5f, -0.5f});
  auto r = ad::value_and_grad([](auto& p) {
    auto& [W, c] = p;
    return sum(W * W) + sum(c);
  }, std::tie(w, b));
  static_assert(std::is_same_v<decltype(r.grad), std::tuple<tensor<float, D, 2>, tensor<float, D, 1>>>);
  static_assert(std::is_same_v<decltype(r.loss), tensor<float, D, 0>>);
  CHECK(r.loss.item() == 30.f);
  CHECK(std::get<0>(r.grad).to_vector() == std::vector<float>{2.f, 4.f, 6.f, 8.f});
  CHECK(std::get<1>(r.grad).to_vector() == std::vector<float>{1.f, 1.f});
  // One tensor in, its gradient out.
  auto g = ad::grad([](auto& W) { return mean(W); }, w);
  static_assert(std::is_same_v<decltype(g), tensor<float, D, 2>>);
  CHECK(g.to_vector() == std::vector<float>{0.25f, 0.25f, 0.25f, 0.25f});
}

TEST_CASE("ad: a parameter no gradient reaches gets zeros, constants and detach stop gradients", "[ad]") {
  tensor<double, cpu> x{1.0, 2.0, 3.0}, unused{4.0, 5.0};
  auto r = ad::value_and_grad([](auto& p) {
    auto& [a, u] = p;
    (void)u;
    // The stable-softmax pattern: the maximum is a constant (its gradient would cancel anyway).
    return sum(exp(a - max(ad::detach(a)))) + sum(a * ad::detach(a));
  }, std::tie(x, unused));
  const auto ga = std::get<0>(r.grad).to_vector();
  for (std::size_t i = 0; i < 3; ++i) CHECK(ga[i] == Approx(std::exp(x.to_vector()[i] - 3.0) + x.to_vector()[i]));
  CHECK(std::get<1>(r.grad).to_vector() == std::vector<double>{0.0, 0.0});
}

TEST_CASE("ad: the elementwise part of relu(x W + b) is one fused kernel forward and two backward", "[ad]") {
  tensor<float, cpu, 2> x(shape{8, 5}, 0.5f);
  tensor<float, cpu, 2> w(shape{5, 3}, 0.1f);
  tensor<float, cpu, 1> b(shape{3}, 0.f);
  auto f = [&](auto& p) {
    auto& [W, c] = p;
    return sum(relu(matmul(x, W) + c));
  };
  const auto before = kernel_launches(id_of<cpu>);
  auto g = ad::grad(f, std::tie(w, b));
  const auto launches = kernel_launches(id_of<cpu>) - before;
  // Forward: the product, relu(. + b), the sum. Backward: the sum's gradient rides in relu's
  // backward kernel (one for the product's gradient, one reduction for b's), then x^T g for W
  // (the input needs no gradient: no product for it).
  CHECK(launches == 6);
  CHECK(std::get<1>(g).to_vector() == std::vector<float>{8.f, 8.f, 8.f});
}

TEST_CASE("ad: errors name what is wrong", "[ad]") {
  tensor<float, cpu, 2> w(shape{3, 4}, 1.f);
  tensor<float, cpu, 2> x(shape{2, 5}, 1.f);
  CHECK_THROWS_WITH(ad::grad([&](auto& W) { return sum(matmul(x, W)); }, w),
                    Catch::Contains("matmul: the inner extents differ"));
  tensor<float, cpu, 1> v(shape{3}, 1.f), u(shape{4}, 1.f);
  CHECK_THROWS_AS(ad::grad([&](auto& a) { return sum(a + u); }, v), shape_error);
  ad::var<float, cpu, 0> empty;
  CHECK_THROWS_WITH(ad::backward(empty), Catch::Contains("default-constructed"));
  CHECK_THROWS_WITH(ad::grad([&](auto& x) { return sum(x * empty); }, v), Catch::Contains("default-constructed var"));
  tensor<float, cpu, 0> no_storage;
  CHECK_THROWS_WITH(ad::grad([](auto& s) { return s * 2.f; }, no_storage), Catch::Contains("empty rank-0 tensor"));
  // A throwing step leaves nothing behind: the next call works.
  auto g = ad::grad([](auto& a) { return sum(a * a); }, v);
  CHECK(g.to_vector() == std::vector<float>{2.f, 2.f, 2.f});
}

TEST_CASE("ad: NaN and infinity propagate into gradients, an empty parameter has an empty gradient", "[ad]") {
  tensor<float, cpu> a{1.f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()};
  const auto g = ad::grad([](auto& x) { return sum(x * 2.f); }, a).to_vector();
  CHECK(g == std::vector<float>{2.f, 2.f, 2.f});
  const auto h = ad::grad([](auto& x) { return sum(x * x); }, a).to_vector();
  CHECK(h[0] == 2.f);
  CHECK(std::isnan(h[1]));
  CHECK(std::isinf(h[2]));
  tensor<float, cpu, 2> e(shape{0, 3});
  auto ge = ad::grad([](auto& x) { return sum(x); }, e);
  CHECK(ge.shape() == shape{std::size_t{0}, std::size_t{3}});
}

// Hostile use, third round (issue 26, item 1): the backward pass runs after the function returned,
// so operands made inside it must stay valid. Before, they were read from arena blocks already
// reused by the backward's own gradients: d/dw sum(w * 2) came out [1, 2, 2, ...].
TEMPLATE_LIST_TEST_CASE("ad: operands made inside the loss function stay valid for the backward pass", "[ad]",
                        float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const std::size_t n = 40;
  tensor<T, D> w(shape{n}, T(1));
  const auto g = ad::grad(
      [n](auto& v) {
        auto k = tensor<T, D>(shape{n}, T(2));
        return sum(v * k);
      },
      w);
  CHECK(g.to_vector() == std::vector<T>(n, T(2)));
  // A mean over a matrix, with other tensors made and freed before the loss returns.
  tensor<T, D, 2> W(shape{4, 4}, T(1));
  const auto gW = ad::grad(
      [](auto& v) {
        auto k = tensor<T, D, 2>(shape{4, 4}, T(3));
        auto r = mean(v * k);
        auto junk = tensor<T, D, 2>(shape{4, 4}, T(100));
        return r;
      },
      W);
  CHECK(gW.to_vector() == std::vector<T>(16, T(3) / T(16)));
  // A local operand of a product (held by the product's step), and one inside a staged reduction
  // (computed again by the backward kernel).
  tensor<T, D, 2> M(shape{3, 2}, T(1));
  const auto gM = ad::grad(
      [](auto& m) {
        auto x = tensor<T, D, 2>(shape{2, 3}, T(2));
        return sum(matmul(x, m));
      },
      M);
  CHECK(gM.to_vector() == std::vector<T>(6, T(4)));
  const auto gs = ad::grad(
      [n](auto& v) {
        auto k = tensor<T, D>(shape{n}, T(0.5));
        return sum(v * sum(k));
      },
      w);
  CHECK(gs.to_vector() == std::vector<T>(n, T(20)));
}

TEST_CASE("ad: a cpu view of the program's own buffer, freed when the loss returns, is copied for the backward",
          "[ad]") {
  // Memory that is not locus's cannot be held: the step keeps a copy (ASan would see a read of
  // the freed vector otherwise).
  tensor<float, cpu> w(shape{8}, 1.f);
  const auto g = ad::grad(
      [](auto& v) {
        auto host = std::make_unique<std::vector<float>>(8, 5.f);
        const tensor_view<const float, cpu, 1> k(host->data(), shape{8});
        auto loss = sum(v * k);
        host.reset();
        std::vector<float> reuse(8, -7.f);  // likely the same heap block
        (void)reuse;
        return loss;
      },
      w);
  CHECK(g.to_vector() == std::vector<float>(8, 5.f));
}

TEST_CASE("ad: a tensor held by a pending backward is not handed out again until the graph goes", "[ad]") {
  tensor<float, cpu> w(shape{1000}, 1.f);
  const float* freed = nullptr;
  auto loss = [&] {
    auto p = ad::parameter(w);
    auto k = tensor<float, cpu>(shape{1000}, 2.f);
    freed = k.data();
    return sum(p * k);  // the graph holds k's block; k itself is destroyed here
  }();
  tensor<float, cpu> next(shape{1000}, 9.f);  // the same size: the arena's first choice for k's block
  CHECK(next.data() != freed);
  (void)loss;
}

// Item 2: a derivative through a constant branch is 0, never 0 * inf or 0 / 0 (NaN).
TEMPLATE_LIST_TEST_CASE("ad: constants' branches give exact gradients where the answer is finite or infinite", "[ad]",
                        float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const T inf = std::numeric_limits<T>::infinity();
  tensor<T, D> x = to<D>(tensor<T, cpu>{T(0), T(1)});
  tensor<T, D> y = to<D>(tensor<T, cpu>{T(1), T(2)});
  // x is a parameter too: its derivative is not formed where y's is asked.
  auto g = ad::grad([](auto& p) { auto& [a, b] = p; return sum(sqrt(a) * b); }, std::tie(x, y));
  CHECK(std::get<1>(g).to_vector() == std::vector<T>{T(0), T(1)});
  g = ad::grad([](auto& p) { auto& [a, b] = p; return sum(log(a) * b); }, std::tie(x, y));
  CHECK(std::get<1>(g).to_vector() == std::vector<T>{-inf, T(0)});
  tensor<T, D> big = to<D>(tensor<T, cpu>{T(1000), T(0)});
  g = ad::grad([](auto& p) { auto& [a, b] = p; return sum(exp(a) * b); }, std::tie(big, y));
  CHECK(std::get<1>(g).to_vector() == std::vector<T>{inf, T(1)});
  g = ad::grad([](auto& p) { auto& [a, b] = p; return sum(tanh(a) * b + sigmoid(a) * b); }, std::tie(big, y));
  CHECK(std::get<1>(g).to_vector() == std::vector<T>{T(2), T(0.5)});
}

// Item 3: NaN wins in elementwise max and min and through relu, as in the reductions; ad picks
// the operand the value came from.
TEST_CASE("ad: max, min and relu of NaN are NaN, and their gradients follow the NaN", "[ad]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  tensor<float, cpu> a{1.f, nan, 3.f}, b{nan, 1.f, 2.f};
  auto g = ad::grad([](auto& p) { auto& [x, y] = p; return sum(max(x, y) * 2.f); }, std::tie(a, b));
  // Element 0: the NaN is b's, element 1: a's, element 2: a (3 > 2).
  CHECK(std::get<0>(g).to_vector()[0] == 0.f);
  CHECK(std::get<1>(g).to_vector()[0] == 2.f);
  CHECK(std::get<0>(g).to_vector()[1] == 2.f);
  CHECK(std::get<0>(g).to_vector()[2] == 2.f);
  const auto r = ad::value_and_grad([](auto& x) { return sum(relu(x)); }, a);
  CHECK(std::isnan(r.loss.item()));
  CHECK(std::isnan(r.grad.to_vector()[1]) == false);  // relu passes the derivative 1 of a NaN element
  CHECK(r.grad.to_vector()[1] == 1.f);
}
