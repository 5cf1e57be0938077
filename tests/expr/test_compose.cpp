// Products and reductions as operands of elementwise expressions (and expressions as operands of
// products): each is evaluated into a temporary on the target device, the rest fused into one
// kernel. Checked against double-precision loops, with the kernel counts and the placement log.
#include "../common/test_support.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using namespace locus;
using locus_test::float_cases;
using locus_test::random_values;

namespace {

std::vector<double> matmul_ref(const std::vector<double>& a, const std::vector<double>& b, std::size_t m, std::size_t k,
                               std::size_t n) {
  std::vector<double> c(m * n, 0.0);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t p = 0; p < k; ++p) c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}

template <class T>
std::vector<double> widen(const std::vector<T>& v) {
  return {v.begin(), v.end()};
}

template <class T>
double tol(std::size_t k) {
  return (std::is_same_v<T, float> ? 4e-6 : 1e-13) * double(k);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("relu(matmul(x, W) + b): the product into a temporary, then one fused kernel", "[expr][compose]",
                        float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const std::size_t m = 13, k = 29, n = 7;
  const auto hx = random_values<T>(m * k, -1, 1, 1), hw = random_values<T>(k * n, -1, 1, 2),
             hb = random_values<T>(n, -1, 1, 3);
  tensor<T, D, 2> x(shape{m, k}, hx), w(shape{k, n}, hw);
  tensor<T, D> b(shape{n}, hb);

  auto ref = matmul_ref(widen(hx), widen(hw), m, k, n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) ref[i * n + j] = std::max(0.0, ref[i * n + j] + double(hb[j]));

  const auto launches = kernel_launches(id_of<D>);
  const auto live = memory_stats(id_of<D>).live_blocks;
  auto y = on<D>(relu(matmul(x, w) + b));
  STATIC_REQUIRE(std::is_same_v<decltype(y), tensor<T, D, 2>>);
  // Two launches: the GEMM, then the bias and the activation as one kernel.
  CHECK(kernel_launches(id_of<D>) - launches == 2);
  CHECK(memory_stats(id_of<D>).live_blocks == live + 1);  // the temporary is back in the arena: y alone lives
  CHECK(locus_test::all_close(y.to_vector(), ref, tol<T>(k)));

  // Into an existing destination, the same numbers, in its own storage.
  tensor<T, D, 2> z(shape{m, n}, T(7));
  const T* storage = z.data();
  z = relu(matmul(x, w) + b);
  CHECK(z.data() == storage);
  CHECK(locus_test::all_close(z.to_vector(), ref, tol<T>(k)));
}

TEMPLATE_LIST_TEST_CASE("sum(a) + sum(b), mean of a comparison, a row softmax in one expression", "[expr][compose]",
                        float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const std::size_t rows = 9, cols = 11;
  const auto ha = random_values<T>(rows * cols, -3, 3, 4), hb = random_values<T>(rows, -2, 2, 5);
  tensor<T, D, 2> a(shape{rows, cols}, ha);
  tensor<T, D> b(shape{rows}, hb);

  double sa = 0, sb = 0;
  for (auto v : ha) sa += double(v);
  for (auto v : hb) sb += double(v);
  const auto launches = kernel_launches(id_of<D>);
  auto s = on<D>(sum(a) + sum(b) * T(2));
  CHECK(kernel_launches(id_of<D>) - launches == 3);  // two reductions, one kernel for the rest
  STATIC_REQUIRE(std::is_same_v<decltype(s), tensor<T, D, 0>>);
  CHECK(std::abs(double(s.item()) - (sa + 2 * sb)) <= tol<T>(rows * cols) * std::max(1.0, std::abs(sa + 2 * sb)));

  // softmax along the rows, written as one expression: max and sum are staged (four launches: the
  // row maximum is written twice, once for the numerator and once inside the sum; no common
  // subexpressions are shared).
  const auto before_softmax = kernel_launches(id_of<D>);
  auto p = on<D>(exp(a - col(max<1>(a))) / col(sum<1>(exp(a - col(max<1>(a))))));
  std::vector<double> ref(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    double mx = -1e300, z = 0;
    for (std::size_t c = 0; c < cols; ++c) mx = std::max(mx, double(ha[r * cols + c]));
    for (std::size_t c = 0; c < cols; ++c) z += std::exp(double(ha[r * cols + c]) - mx);
    for (std::size_t c = 0; c < cols; ++c) ref[r * cols + c] = std::exp(double(ha[r * cols + c]) - mx) / z;
  }
  CHECK(kernel_launches(id_of<D>) - before_softmax == 4);
  CHECK(locus_test::all_close(p.to_vector(), ref, tol<T>(cols)));

  // Accuracy: argmax of each row against labels, averaged; a reduction of a staged reduction.
  std::vector<std::int64_t> labels(rows);
  double hits = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    std::size_t best = 0;
    for (std::size_t c = 1; c < cols; ++c)
      if (ha[r * cols + c] > ha[r * cols + best]) best = c;
    labels[r] = (r % 3 == 0) ? std::int64_t(best) : std::int64_t((best + 1) % cols);
    hits += (r % 3 == 0) ? 1 : 0;
  }
  tensor<std::int64_t, D> y(shape{rows}, labels);
  auto accuracy = on<D>(mean(where(argmax<1>(a) == y, T(1), T(0))));
  CHECK(std::abs(double(accuracy.item()) - hits / double(rows)) <= 1e-6);

  // t += reduction: staged, then added in place.
  tensor<T, D> acc(shape{cols}, T(1));
  acc += sum<0>(a);
  std::vector<double> colsum(cols, 1.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) colsum[c] += double(ha[r * cols + c]);
  CHECK(locus_test::all_close(acc.to_vector(), colsum, tol<T>(rows)));
}

TEMPLATE_LIST_TEST_CASE("expressions as operands of a product, a product of products", "[expr][compose]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const std::size_t m = 6, k = 10, n = 5, q = 4;
  const auto hx = random_values<T>(m * k, -1, 1, 6), hw = random_values<T>(k * n, -1, 1, 7),
             hv = random_values<T>(n * q, -1, 1, 8);
  tensor<T, D, 2> x(shape{m, k}, hx), w(shape{k, n}, hw), v(shape{n, q}, hv);

  // matmul(relu(x) * 2, W): the elementwise operand is evaluated first.
  std::vector<double> rx(m * k);
  for (std::size_t i = 0; i < rx.size(); ++i) rx[i] = 2 * std::max(0.0, double(hx[i]));
  CHECK(locus_test::all_close(on<D>(matmul(relu(x) * T(2), w)).to_vector(), matmul_ref(rx, widen(hw), m, k, n), tol<T>(k)));

  // Two layers in one expression, and a transposed expression.
  const auto h = matmul_ref(widen(hx), widen(hw), m, k, n);
  std::vector<double> hr(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) hr[i] = std::max(0.0, h[i]);
  CHECK(locus_test::all_close(on<D>(matmul(relu(matmul(x, w)), v)).to_vector(), matmul_ref(hr, widen(hv), m, n, q),
                              tol<T>(k * n)));
  std::vector<double> xt2(k * m);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < k; ++j) xt2[j * m + i] = 2 * double(hx[i * k + j]);
  tensor<T, D, 2> ones(shape{m, 1}, T(1));
  CHECK(locus_test::all_close(on<D>(matmul(transpose(x * T(2)), ones)).to_vector(),
                              matmul_ref(xt2, std::vector<double>(m, 1.0), k, m, 1), tol<T>(m)));
}

TEMPLATE_LIST_TEST_CASE("a composed expression that fails leaves the destination untouched", "[expr][compose]",
                        float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  tensor<T, D, 2> x(shape{3, 4}, T(1)), w(shape{4, 2}, T(1)), empty(shape{0, 4});
  tensor<T, D> b(shape{3}, T(0));  // 3 columns for a product with 2
  tensor<T, D, 2> dst(shape{3, 2}, T(5));
  CHECK_THROWS_WITH(dst = relu(matmul(x, w) + b), Catch::Matchers::Contains("locus: add") &&
                                                       Catch::Matchers::Contains("[3, 2]") &&
                                                       Catch::Matchers::Contains("[3]"));
  CHECK(dst.to_vector() == std::vector<T>(6, T(5)));
  // The inner shape error of the product itself, when the expression is built.
  CHECK_THROWS_WITH(relu(matmul(w, x) + T(1)), Catch::Matchers::Contains("locus: matmul: the inner extents differ"));
  // max of an empty input: thrown by the staged step, before anything is written.
  tensor<T, D> out(shape{1}, T(9));
  CHECK_THROWS_WITH(out = out + max(empty), Catch::Matchers::Contains("max of an empty input"));
  CHECK(out.to_vector() == std::vector<T>{T(9)});
  // NaN travels through a staged reduction.
  tensor<T, D> nan_in{T(1), std::numeric_limits<T>::quiet_NaN()};
  CHECK(std::isnan(double(on<D>(sum(nan_in) + T(1)).item())));
}

TEMPLATE_LIST_TEST_CASE("a destination read by a staged product is safe to overwrite", "[expr][compose]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  // W = W - 0.5 * matmul(W, A): the product is taken from the old W before W is written.
  const auto hw = random_values<T>(16, -1, 1, 9), ha = random_values<T>(16, -1, 1, 10);
  tensor<T, D, 2> w(shape{4, 4}, hw), a(shape{4, 4}, ha);
  auto ref = matmul_ref(widen(hw), widen(ha), 4, 4, 4);
  for (std::size_t i = 0; i < 16; ++i) ref[i] = double(hw[i]) - 0.5 * ref[i];
  w = w - matmul(w, a) * T(0.5);
  CHECK(locus_test::all_close(w.to_vector(), ref, tol<T>(4)));
}

#if LOCUS_HAS_GPUS
TEST_CASE("the placement log shows each step of a composed expression", "[expr][compose][log]") {
  tensor<float, gpu<1>, 2> x(shape{2, 3}, 1.f), w(shape{3, 2}, 1.f);
  tensor<float, gpu<1>> b(shape{2}, 0.f);
  x.set_name("x");
  w.set_name("W");
  b.set_name("b");
  locus_test::log_capture log;
  auto y = on<gpu<1>>(relu(matmul(x, w) + b));
  const auto dev = locus_test::logged(id_of<gpu<1>>);
  const std::vector<std::string> expected{"x: (Const): " + dev, "W: (Const): " + dev, "matmul: (MatMul): " + dev,
                                          "b: (Const): " + dev, "add: (Add): " + dev, "relu: (Relu): " + dev};
  CHECK(log.lines == expected);
  CHECK(y.to_vector() == std::vector<float>{3.f, 3.f, 3.f, 3.f});
}

TEST_CASE("composed expressions keep the placement rules: implicit transfers copy the product's operands",
          "[expr][compose][placement]") {
  tensor<float, gpu<0>, 2> x(shape{2, 3}, 1.f);
  tensor<float, gpu<1>, 2> w(shape{3, 2}, 2.f);
  locus_test::log_capture log;
  auto y = on<gpu<1>, implicit_transfers>(relu(matmul(x, w)) + 1.f);
  STATIC_REQUIRE(std::is_same_v<decltype(y), tensor<float, gpu<1>, 2>>);
  CHECK(y.to_vector() == std::vector<float>(4, 7.f));
  CHECK(log.contains("transfer: (Copy): " + id_of<gpu<0>>.full_name() + " -> " + id_of<gpu<1>>.full_name()));
}
#endif

TEMPLATE_LIST_TEST_CASE("integer reductions inside expressions keep numpy's types, and a view destination read by a "
                        "staged reduction", "[expr][compose]", locus_test::devices) {
  using D = TestType;
  tensor<std::int32_t, D> i{2147483647, 2147483647, -5};
  auto s = on<D>(sum(i) + std::int64_t(1));  // the sum is int64: no wrap at 32 bits
  STATIC_REQUIRE(std::is_same_v<decltype(s), tensor<std::int64_t, D, 0>>);
  CHECK(s.item() == std::int64_t(2147483647) * 2 - 5 + 1);

  // Row 0 of m becomes row 1 plus the column sums of all of m, row 0 included: the sums are taken
  // before row 0 is written.
  tensor<float, D, 2> m{{1.f, 2.f}, {3.f, 4.f}};
  m.row(0) = m.row(1) + sum<0>(m);
  CHECK(m.to_vector() == std::vector<float>{7.f, 10.f, 3.f, 4.f});
  // A rank-1 tensor minus its own mean, in place.
  tensor<float, D> v{1.f, 2.f, 6.f};
  v = v - mean(v);
  CHECK(v.to_vector() == std::vector<float>{-2.f, -1.f, 3.f});
}

#if LOCUS_HAS_GPUS
namespace {
struct host_only_square {
  static constexpr const char* name = "square";
  static constexpr const char* type = "Square";
  static constexpr bool host_only = true;
  float operator()(float x) const { return x * x; }
};
}  // namespace

TEST_CASE("soft placement runs a composed expression on the cpu, staged steps included", "[expr][compose][placement]") {
  tensor<float, gpu<0>, 2> x(shape{2, 2}, 1.f), w(shape{2, 2}, 1.f);
  locus_test::log_capture log;
  const auto gpu_launches = kernel_launches(id_of<gpu<0>>);
  auto y = on<gpu<0>, soft_placement>(map(host_only_square{}, matmul(x, w)) + 1.f);
  STATIC_REQUIRE(std::is_same_v<decltype(y), tensor<float, cpu, 2>>);
  CHECK(y.to_vector() == std::vector<float>(4, 5.f));
  CHECK(kernel_launches(id_of<gpu<0>>) == gpu_launches);  // the product ran on the cpu too
  CHECK(log.contains("matmul: (MatMul): " + locus_test::logged(id_of<cpu>)));
  CHECK(log.contains("square: (Square): " + locus_test::logged(id_of<cpu>)));
}
#endif
