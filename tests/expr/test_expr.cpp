#include "../common/test_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

using namespace locus;
using locus_test::all_close;
using locus_test::float_cases;
using locus_test::random_values;

namespace {

// Large enough to take the parallel path, odd so that no loop divides it evenly.
constexpr std::size_t n_large = (std::size_t{1} << 15) + 7;

template <class T>
std::vector<double> reference(const std::vector<T>& a, const std::function<double(double)>& f) {
  std::vector<double> r(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) r[i] = f(static_cast<double>(a[i]));
  return r;
}
template <class T>
std::vector<double> reference(const std::vector<T>& a, const std::vector<T>& b,
                              const std::function<double(double, double)>& f) {
  std::vector<double> r(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) r[i] = f(static_cast<double>(a[i]), static_cast<double>(b[i]));
  return r;
}

struct clamp_to_unit {  // a user function object for map()
  template <class T>
  LOCUS_HOST_DEVICE T operator()(T x) const {
    return x < T(0) ? T(0) : (x > T(1) ? T(1) : x);
  }
};

}  // namespace

TEMPLATE_LIST_TEST_CASE("arithmetic matches a double-precision loop", "[expr]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  for (std::size_t n : {std::size_t{17}, n_large}) {
    const auto ha = random_values<T>(n, 0.5, 2.0, 1), hb = random_values<T>(n, 0.5, 2.0, 2);
    tensor<T, D> a(ha), b(hb);
    CHECK(all_close(on<D>(a + b).to_vector(), reference(ha, hb, std::plus<>{})));
    CHECK(all_close(on<D>(a - b).to_vector(), reference(ha, hb, std::minus<>{})));
    CHECK(all_close(on<D>(a * b).to_vector(), reference(ha, hb, std::multiplies<>{})));
    CHECK(all_close(on<D>(a / b).to_vector(), reference(ha, hb, std::divides<>{})));
    CHECK(all_close(on<D>(-a).to_vector(), reference(ha, [](double x) { return -x; })));
    CHECK(all_close(on<D>(T(3) - a).to_vector(), reference(ha, [](double x) { return 3 - x; })));
    CHECK(all_close(on<D>(a / 4).to_vector(), reference(ha, [](double x) { return x / 4; })));
    CHECK(all_close(on<D>(pow(a, b)).to_vector(), reference(ha, hb, [](double x, double y) { return std::pow(x, y); }), 8 * locus_test::tolerance<T>()));
    CHECK(all_close(on<D>(min(a, b)).to_vector(), reference(ha, hb, [](double x, double y) { return std::min(x, y); })));
    CHECK(all_close(on<D>(max(a, 1.0)).to_vector(), reference(ha, [](double x) { return std::max(x, 1.0); })));
  }
}

TEMPLATE_LIST_TEST_CASE("math functions match a double-precision loop", "[expr]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const double tol = 4 * locus_test::tolerance<T>();
  const auto hp = random_values<T>(n_large, 0.1, 4.0, 3);   // positive: log, sqrt
  const auto hs = random_values<T>(n_large, -4.0, 4.0, 4);  // signed
  tensor<T, D> p(hp), s(hs);
  CHECK(all_close(on<D>(exp(s)).to_vector(), reference(hs, [](double x) { return std::exp(x); }), tol));
  CHECK(all_close(on<D>(log(p)).to_vector(), reference(hp, [](double x) { return std::log(x); }), tol));
  CHECK(all_close(on<D>(sqrt(p)).to_vector(), reference(hp, [](double x) { return std::sqrt(x); }), tol));
  CHECK(all_close(on<D>(abs(s)).to_vector(), reference(hs, [](double x) { return std::abs(x); }), tol));
  CHECK(all_close(on<D>(tanh(s)).to_vector(), reference(hs, [](double x) { return std::tanh(x); }), tol));
  CHECK(all_close(on<D>(sigmoid(s)).to_vector(), reference(hs, [](double x) { return 1 / (1 + std::exp(-x)); }), tol));
  CHECK(all_close(on<D>(relu(s)).to_vector(), reference(hs, [](double x) { return x > 0 ? x : 0; }), tol));
  CHECK(all_close(on<D>(map(clamp_to_unit{}, s)).to_vector(),
                  reference(hs, [](double x) { return std::clamp(x, 0.0, 1.0); }), tol));
}

TEMPLATE_LIST_TEST_CASE("comparisons, where and casts", "[expr]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const auto ha = random_values<T>(n_large, -1, 1, 5), hb = random_values<T>(n_large, -1, 1, 6);
  tensor<T, D> a(ha), b(hb);
  const auto lt = on<D>(a < b).to_vector(), ge = on<D>(a >= 0).to_vector(), eq = on<D>(a == a).to_vector();
  const auto sel = on<D>(where(a > b, a, b * 2)).to_vector();
  const auto sel_scalar = on<D>(where(a > 0, T(1), T(-1))).to_vector();
  const auto rounded = on<D>(cast<int>(a * 10)).to_vector();
  STATIC_REQUIRE(std::is_same_v<decltype(on<D>(a < b)), tensor<bool, D>>);
  STATIC_REQUIRE(std::is_same_v<decltype(on<D>(cast<int>(a))), tensor<int, D>>);
  for (std::size_t i = 0; i < n_large; ++i) {
    REQUIRE(lt[i] == (ha[i] < hb[i]));
    REQUIRE(ge[i] == (ha[i] >= 0));
    REQUIRE(eq[i]);
    REQUIRE(sel[i] == (ha[i] > hb[i] ? ha[i] : hb[i] * 2));
    REQUIRE(sel_scalar[i] == (ha[i] > 0 ? T(1) : T(-1)));
    REQUIRE(rounded[i] == static_cast<int>(ha[i] * 10));
  }
}

TEST_CASE("integer expressions stay integers", "[expr]") {
  tensor<int, cpu> a{-3, 0, 4}, b{2, 5, -1};
  STATIC_REQUIRE(std::is_same_v<decltype(on<cpu>(a * b)), tensor<int, cpu>>);
  CHECK(on<cpu>(a * b + 1).to_vector() == std::vector<int>{-5, 1, -3});
  CHECK(on<cpu>(abs(a)).to_vector() == std::vector<int>{3, 0, 4});
  CHECK(on<cpu>(relu(a)).to_vector() == std::vector<int>{0, 0, 4});
  tensor<unsigned, cpu> u{1u, 7u};
  CHECK(on<cpu>(abs(u)).to_vector() == std::vector<unsigned>{1u, 7u});
}

TEST_CASE("scalars take the element type of the tensor", "[expr]") {
  tensor<float, cpu> a{1.f, 2.f};
  STATIC_REQUIRE(std::is_same_v<decltype(on<cpu>(a * 2.0)), tensor<float, cpu>>);
  STATIC_REQUIRE(std::is_same_v<decltype(on<cpu>(2 - a)), tensor<float, cpu>>);
  tensor<double, cpu> d{1.0};
  STATIC_REQUIRE(std::is_same_v<decltype(on<cpu>(a + d)), tensor<double, cpu>>);  // two tensors: common type
}

TEMPLATE_LIST_TEST_CASE("a whole expression is one kernel with no temporaries", "[expr][fusion]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  tensor<T, D> y(random_values<T>(n_large, 0.5, 2.0, 7));
  const auto hy = y.to_vector();
  const auto launches = kernel_launches(id_of<D>);
  const auto live = memory_stats(id_of<D>).live_blocks;
  auto w = on<D>(exp(y) * T(2) - sqrt(y) + where(y > T(1), y, T(0)) / (y + T(1)));
  CHECK(kernel_launches(id_of<D>) == launches + 1);
  CHECK(memory_stats(id_of<D>).live_blocks == live + 1);  // the result, nothing else
  CHECK(all_close(w.to_vector(), reference(hy, [](double v) {
                    return std::exp(v) * 2 - std::sqrt(v) + (v > 1 ? v : 0) / (v + 1);
                  }), 8 * locus_test::tolerance<T>()));
}

TEMPLATE_LIST_TEST_CASE("assigning an expression writes into the destination, aliasing included", "[expr][assign]",
                        float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const auto ha = random_values<T>(n_large, -1, 1, 8), hb = random_values<T>(n_large, -1, 1, 9);
  tensor<T, D> a(ha), b(hb);
  const T* storage = a.data();
  a = a * T(2) + b;
  CHECK(a.data() == storage);
  CHECK(all_close(a.to_vector(), reference(ha, hb, [](double x, double y) { return x * 2 + y; })));
  tensor<T, D> c;  // empty: takes the expression's shape
  c = a - b;
  CHECK(c.size() == n_large);
  tensor<T, D> d = b * b;  // constructed from an expression
  CHECK(all_close(d.to_vector(), reference(hb, [](double x) { return x * x; })));
}

TEMPLATE_LIST_TEST_CASE("rank-2 expressions", "[expr]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  tensor<T, D, 2> m{{T(1), T(2), T(3)}, {T(4), T(5), T(6)}};
  auto r = on<D>(m * m - T(1));
  STATIC_REQUIRE(decltype(r)::rank == 2);
  CHECK(r.shape() == shape{2, 3});
  CHECK(r.to_vector() == std::vector<T>{T(0), T(3), T(8), T(15), T(24), T(35)});
}

TEMPLATE_LIST_TEST_CASE("mismatched extents throw shape_error before any kernel runs", "[expr][errors]",
                        float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  tensor<T, D> a{T(1), T(2), T(3)}, b{T(1), T(2), T(3), T(4)};
  tensor<T, D> c{T(9), T(9), T(9), T(9)};
  tensor<T, D, 2> m(shape{2, 3}), k(shape{3, 2});
  const auto launches = kernel_launches(id_of<D>);
  CHECK_THROWS_WITH(on<D>(a + b), "locus: add: operand shapes [3] and [4] do not match");
  CHECK_THROWS_WITH(on<D>(exp(a) * (b + T(1))), "locus: mul: operand shapes [3] and [4] do not match");
  CHECK_THROWS_WITH(c = a * T(2), "locus: assignment: the destination has shape [4], the expression [3]");
  CHECK(c.to_vector() == std::vector<T>(4, T(9)));  // untouched
  CHECK_THROWS_WITH(on<D>(m + k), "locus: add: operand shapes [2, 3] and [3, 2] do not broadcast (a rank-1 operand "
                                   "is a row and must match the columns; col(v) is a column and must match the rows)");
  CHECK(kernel_launches(id_of<D>) == launches);
}

TEMPLATE_LIST_TEST_CASE("temporary tensors are owned by the expression", "[expr]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  tensor<T, D> b{T(1), T(2)};
  auto e = tensor<T, D>{T(10), T(20)} + b;  // the temporary lives as long as e
  auto f = e * T(2);                        // expressions copy cheaply
  CHECK(on<D>(f).to_vector() == std::vector<T>{T(22), T(44)});
  CHECK(on<D>(e).to_vector() == std::vector<T>{T(11), T(22)});
}

namespace overloads {
template <class A, class B>
concept addable = requires(A a, B b) { a + b; };
}  // namespace overloads

TEST_CASE("operators never take part in unrelated overload sets", "[expr]") {
  STATIC_REQUIRE(!overloads::addable<std::vector<float>, float>);
  STATIC_REQUIRE(!overloads::addable<std::string, int>);
  STATIC_REQUIRE(overloads::addable<tensor<float, cpu>&, float>);
  STATIC_REQUIRE(overloads::addable<float, const tensor<float, cpu>&>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<decltype((tensor<float, cpu>{} + 1.f).kernel())>);
}

TEST_CASE("the broadcasting divisor equals / and % on every operand size", "[expr][divisor]") {
  std::mt19937_64 gen(11);
  const std::size_t big = std::size_t{1} << 32;
  std::vector<std::size_t> ds{1, 2, 3, 7, 10, 255, 256, 784, 1000003, 0xFFFFFFFEu, 0xFFFFFFFFu, big, big + 1};
  for (int k = 0; k < 200; ++k) ds.push_back(1 + gen() % 0xFFFFFFFFu);
  for (std::size_t d : ds) {
    const locus::expr::divisor div(d);
    std::vector<std::size_t> is{0, 1, d - 1, d, d + 1, 2 * d - 1, 0xFFFFFFFEu, 0xFFFFFFFFu, big, big * 3 + 5};
    for (int k = 0; k < 200; ++k) is.push_back(gen() % 0xFFFFFFFFu);
    for (int k = 0; k < 20; ++k) is.push_back(gen());
    for (std::size_t i : is) {
      REQUIRE(div.div(i) == i / d);
      REQUIRE(div.mod(i) == i % d);
    }
  }
}

TEMPLATE_LIST_TEST_CASE("operands that partly overlap the destination are read before it is written",
                        "[expr][assign][overlap]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  // A shifted view of the same tensor (numpy: t[1:9] = t[0:8] * 1 gives 0 0 1 2 3 4 5 6 7), large
  // enough for the host's parallel path.
  const std::size_t n = std::size_t{1} << 16;
  std::vector<T> host(n + 1);
  for (std::size_t i = 0; i <= n; ++i) host[i] = T(i % 1000);
  tensor<T, D> t(host);
  tensor_view<T, D> dst(t.data() + 1, shape{n}), src(t.data(), shape{n});
  dst = src * T(1);
  const auto got = t.to_vector();
  std::size_t wrong = got[0] != T(0);
  for (std::size_t i = 1; i <= n; ++i) wrong += got[i] != host[i - 1];
  CHECK(wrong == 0);
  // A row of a matrix broadcast over the same matrix: m = m - row 0 (numpy: 0 0 2 2 4 4).
  tensor<T, D, 2> m{{T(1), T(2)}, {T(3), T(4)}, {T(5), T(6)}};
  tensor_view<const T, D> row0(m.data(), shape{2});
  m = m - row0;
  CHECK(m.to_vector() == std::vector<T>{T(0), T(0), T(2), T(2), T(4), T(4)});
  // A reduction into memory it reads (each row's sum into row 0) goes through a temporary as well,
  // large enough for the host's parallel loop.
  const std::size_t side = 256;
  std::vector<T> hm(side * side);
  for (std::size_t r = 0; r < side; ++r)
    for (std::size_t c = 0; c < side; ++c) hm[r * side + c] = T(r + 1);
  tensor<T, D, 2> big(shape{side, side}, hm);
  tensor_view<T, D> first_row(big.data(), shape{side});
  first_row = sum<1>(big);
  const auto sums = big.to_vector();
  std::size_t off = 0;
  for (std::size_t r = 0; r < side; ++r) off += sums[r] != T(side * (r + 1));
  CHECK(off == 0);
  // Exact aliasing stays in place, with no temporary: one kernel, the same storage.
  tensor<T, D> a{T(1), T(2), T(3)}, b{T(1), T(1), T(1)};
  const T* storage = a.data();
  const auto launches = kernel_launches(id_of<D>);
  a = a + b;
  CHECK(kernel_launches(id_of<D>) == launches + 1);
  CHECK(a.data() == storage);
  CHECK(a.to_vector() == std::vector<T>{T(2), T(3), T(4)});
}

TEST_CASE("integer division by zero and INT_MIN / -1 give numpy's answers, never a signal", "[expr][integers]") {
  constexpr auto lo = std::numeric_limits<std::int32_t>::min();
  tensor<std::int32_t, cpu> x{7, -7, lo, lo, 0, 5};
  tensor<std::int32_t, cpu> y{0, 0, -1, 0, 0, -1};
  CHECK(on<cpu>(x / y).to_vector() == std::vector<std::int32_t>{0, 0, lo, 0, 0, -5});
  tensor<std::int64_t, cpu> x64{std::numeric_limits<std::int64_t>::min(), 9};
  tensor<std::int64_t, cpu> y64{-1, 0};
  CHECK(on<cpu>(x64 / y64).to_vector() == std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min(), 0});
#if LOCUS_HAS_GPUS
  CHECK(on<gpu<0>>(to<gpu<0>>(x) / to<gpu<0>>(y)).to_vector() == std::vector<std::int32_t>{0, 0, lo, 0, 0, -5});
#endif
  // + - * and unary - wrap modulo 2^32, as numpy's int32 (in C++ this overflow is undefined: the
  // asan stage's UBSan would stop here).
  constexpr auto hi = std::numeric_limits<std::int32_t>::max();
  tensor<std::int32_t, cpu> top{hi, lo, hi};
  tensor<std::int32_t, cpu> one{1, 1, 2};
  CHECK(on<cpu>(top + one).to_vector() == std::vector<std::int32_t>{lo, lo + 1, lo + 1});
  CHECK(on<cpu>(top - one * 2).to_vector() == std::vector<std::int32_t>{hi - 2, hi - 1, hi - 4});
  CHECK(on<cpu>(-top).to_vector() == std::vector<std::int32_t>{-hi, lo, -hi});
  CHECK(on<cpu>(top * one).to_vector() == std::vector<std::int32_t>{hi, lo, -2});
  tensor<float, cpu> f{1.f, -1.f, 0.f};
  const auto q = on<cpu>(f / 0.f).to_vector();
  CHECK(q[0] == std::numeric_limits<float>::infinity());
  CHECK(q[1] == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(q[2]));
}

TEST_CASE("an expression whose operands all have its shape is also a function of their values", "[expr][direct]") {
  const std::size_t n = 1000;
  const auto ha = random_values<float>(n, 0.5, 2, 1), hb = random_values<float>(n, 0.5, 2, 2),
             hc = random_values<float>(n, 0.5, 2, 3);
  tensor<float, cpu> a(ha), b(hb), c(hc);
  const auto node = expr::as_node(exp(a) * 2.f - b / c + where(a > b, a, c));
  static_assert(expr::direct::capable<decltype(node)>);
  const auto inputs = expr::direct::inputs(node);
  static_assert(std::tuple_size_v<decltype(inputs)> == 7);  // a, b, c, a, b, a, c: every leaf, in order
  const auto f = expr::direct::function(node);
  const auto k = node.kernel();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    wrong += std::apply([&](const auto*... p) { return f(p[i]...); }, inputs) != k(i);
  CHECK(wrong == 0);
  // Broadcasts, rank-0 operands and generated operands read by index: not direct.
  tensor<float, cpu, 2> m(shape{3, 4}, 1.f);
  tensor<float, cpu> row(shape{4}, 2.f);
  tensor<float, cpu, 0> s = sum(a);
  static_assert(!expr::direct::capable<decltype(expr::as_node(m + row))>);
  static_assert(expr::direct::capable<decltype(expr::as_node(m * 2.f + m))>);
  static_assert(!expr::direct::capable<decltype(expr::as_node(a + s))>);
  static_assert(!expr::direct::capable<decltype(expr::as_node(a + random::uniform<float>(shape{n}, 1, 0.0, 1.0)))>);
  CHECK(s.size() == 1);
}

// Hostile use, third round (issue 26, item 3): before, max([1, nan], [nan, 1]) was [1, nan] and
// relu(nan) 0; the README and the reductions say NaN wins.
TEMPLATE_LIST_TEST_CASE("elementwise max, min and relu: a NaN operand gives NaN, on every device", "[expr][nan]",
                        float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  const tensor<T, D> a = to<D>(tensor<T, cpu>{T(1), nan, nan, -inf, T(2)});
  const tensor<T, D> b = to<D>(tensor<T, cpu>{nan, T(1), nan, T(0), T(-3)});
  for (const auto& v : {on<D>(max(a, b)).to_vector(), on<D>(min(a, b)).to_vector()}) {
    CHECK(std::isnan(v[0]));
    CHECK(std::isnan(v[1]));
    CHECK(std::isnan(v[2]));
  }
  CHECK(on<D>(max(a, b)).to_vector()[3] == T(0));
  CHECK(on<D>(min(a, b)).to_vector()[3] == -inf);
  CHECK(on<D>(max(a, b)).to_vector()[4] == T(2));
  CHECK(std::isnan(on<D>(max(a, T(0))).to_vector()[1]));
  const auto r = on<D>(relu(a)).to_vector();
  CHECK(r[0] == T(1));
  CHECK(std::isnan(r[1]));
  CHECK(r[3] == T(0));
  // Integers are untouched by the NaN rule.
  tensor<int, cpu> i{3, -4}, j{-1, 7};
  CHECK(on<cpu>(max(i, j)).to_vector() == std::vector<int>{3, 7});
  CHECK(on<cpu>(min(i, j)).to_vector() == std::vector<int>{-1, -4});
}
