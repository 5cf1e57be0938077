#include "../common/test_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

using namespace locus;
using locus_test::float_cases;
using locus_test::random_values;

namespace {

template <class T>
double rel_tol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}
bool close(double got, double want, double tol) { return std::abs(got - want) <= tol * std::max(1.0, std::abs(want)); }

}  // namespace

TEMPLATE_LIST_TEST_CASE("whole-tensor reductions match a double-precision loop", "[ops][reduce]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  for (std::size_t n : {std::size_t{1}, std::size_t{37}, (std::size_t{1} << 17) + 5}) {
    const auto ha = random_values<T>(n, -1, 1, 11), hb = random_values<T>(n, -1, 1, 12);
    tensor<T, D> a(ha), b(hb);
    double s = 0, sd = 0, ss = 0;
    for (std::size_t i = 0; i < n; ++i) {
      s += ha[i];
      sd += double(ha[i]) * double(hb[i]);
      ss += double(ha[i]) * double(ha[i]);
    }
    const auto imax = std::max_element(ha.begin(), ha.end()) - ha.begin();
    auto total = on<D>(sum(a));
    STATIC_REQUIRE(std::is_same_v<decltype(total), tensor<T, D, 0>>);
    CHECK(close(total.item(), s, rel_tol<T>() * std::sqrt(double(n))));
    CHECK(close(on<D>(mean(a)).item(), s / double(n), rel_tol<T>() * std::sqrt(double(n))));
    CHECK(close(on<D>(dot(a, b)).item(), sd, rel_tol<T>() * std::sqrt(double(n))));
    CHECK(close(on<D>(sum(a * b)).item(), sd, rel_tol<T>() * std::sqrt(double(n))));
    CHECK(close(on<D>(norm(a)).item(), std::sqrt(ss), rel_tol<T>() * std::sqrt(double(n))));
    CHECK(on<D>(max(a)).item() == *std::max_element(ha.begin(), ha.end()));
    CHECK(on<D>(min(a)).item() == *std::min_element(ha.begin(), ha.end()));
    CHECK(on<D>(argmax(a)).item() == imax);
    const auto positives = std::count_if(ha.begin(), ha.end(), [](T x) { return x > 0; });
    CHECK(on<D>(count_if(a > 0)).item() == positives);
  }
}

TEMPLATE_LIST_TEST_CASE("a reduction of an expression is one pass with no temporary", "[ops][reduce][fusion]",
                        float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  tensor<T, D> a(random_values<T>(1 << 16, -1, 1, 13)), b(random_values<T>(1 << 16, -1, 1, 14));
  const auto live = memory_stats(id_of<D>).live_blocks;
  const auto launches = kernel_launches(id_of<D>);
  auto s = on<D>(sum(a * b + a));
  CHECK(memory_stats(id_of<D>).live_blocks == live + 1);  // the result only
  // host: one pass; CUDA: the CUB pass plus one one-element kernel for the result
  CHECK(kernel_launches(id_of<D>) - launches == (backend::runs_on_host<D> ? 1u : 2u));
  const auto ha = a.to_vector(), hb = b.to_vector();
  double ref = 0;
  for (std::size_t i = 0; i < ha.size(); ++i) ref += double(ha[i]) * hb[i] + ha[i];
  CHECK(close(s.item(), ref, 1e-3));
}

TEMPLATE_LIST_TEST_CASE("reductions along an axis of a matrix", "[ops][reduce][axis]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const std::size_t rows = 67, cols = 129;
  const auto hm = random_values<T>(rows * cols, -1, 1, 15);
  tensor<T, D, 2> m(shape{rows, cols}, hm);
  const auto row_sum = on<D>(sum<1>(m)).to_vector();
  const auto col_sum = on<D>(sum<0>(m)).to_vector();
  const auto row_max = on<D>(max<1>(m)).to_vector();
  const auto col_mean = on<D>(mean<0>(m)).to_vector();
  const auto row_arg = on<D>(argmax<1>(m)).to_vector();
  const auto col_arg = on<D>(argmax<0>(m * T(-1))).to_vector();
  REQUIRE(row_sum.size() == rows);
  REQUIRE(col_sum.size() == cols);
  for (std::size_t r = 0; r < rows; ++r) {
    double s = 0;
    std::size_t arg = 0;
    for (std::size_t c = 0; c < cols; ++c) {
      s += hm[r * cols + c];
      if (hm[r * cols + c] > hm[r * cols + arg]) arg = c;
    }
    CHECK(close(row_sum[r], s, 1e-4));
    CHECK(row_max[r] == hm[r * cols + arg]);
    CHECK(row_arg[r] == static_cast<std::int64_t>(arg));
  }
  for (std::size_t c = 0; c < cols; ++c) {
    double s = 0;
    std::size_t arg = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      s += hm[r * cols + c];
      if (-hm[r * cols + c] > -hm[arg * cols + c]) arg = r;
    }
    CHECK(close(col_sum[c], s, 1e-4));
    CHECK(close(col_mean[c], s / rows, 1e-4));
    CHECK(col_arg[c] == static_cast<std::int64_t>(arg));
  }
}

TEST_CASE("argmax takes the first of equal maxima", "[ops][reduce]") {
  tensor<float, cpu> a{1.f, 5.f, 2.f, 5.f};
  CHECK(on<cpu>(argmax(a)).item() == 1);
  tensor<float, cpu, 2> m{{3.f, 3.f}, {0.f, 7.f}};
  CHECK(on<cpu>(argmax<1>(m)).to_vector() == std::vector<std::int64_t>{0, 1});
}

TEST_CASE("reductions are logged and rank-0 results broadcast", "[ops][reduce][log]") {
  auto a = tensor<float, cpu>{1.f, 2.f, 3.f, 6.f}.named("a");
  locus_test::log_capture log;
  auto m = on<cpu>(mean(a));
  CHECK(log.lines.back() == "mean: (Mean): /job:localhost/replica:0/task:0/device:CPU:0");
  auto centred = on<cpu>(a - m);  // a rank-0 tensor is broadcast like a scalar
  CHECK(centred.to_vector() == std::vector<float>{-2.f, -1.f, 0.f, 3.f});
  CHECK_THROWS_WITH(a.item(), "locus: item() needs a tensor of one element, this one has shape [4]");
}

TEMPLATE_LIST_TEST_CASE("broadcasting rows and columns over a matrix", "[ops][broadcast]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  tensor<T, D, 2> m{{T(1), T(2), T(3)}, {T(4), T(5), T(6)}};
  tensor<T, D> bias{T(10), T(20), T(30)};
  tensor<T, D> scale{T(2), T(-1)};
  CHECK(on<D>(m + bias).to_vector() == std::vector<T>{T(11), T(22), T(33), T(14), T(25), T(36)});
  CHECK(on<D>(m * col(scale)).to_vector() == std::vector<T>{T(2), T(4), T(6), T(-4), T(-5), T(-6)});
  auto outer = on<D>(col(scale) * bias);
  CHECK(outer.shape() == shape{2, 3});
  CHECK(outer.to_vector() == std::vector<T>{T(20), T(40), T(60), T(-10), T(-20), T(-30)});
  tensor<T, D> wrong(shape{4});
  CHECK_THROWS_WITH(on<D>(m + wrong), "locus: add: operand shapes [2, 3] and [4] do not broadcast (a rank-1 operand "
                                      "is a row and must match the columns; col(v) is a column and must match the rows)");
  CHECK_THROWS_AS(on<D>(m * col(bias)), shape_error);
  // dot's operands are multiplied inside it: its error names dot, not the product.
  CHECK_THROWS_WITH(dot(scale, bias), "locus: dot: operand shapes [2] and [3] do not match");
  CHECK_THROWS_WITH(dot<1>(m, wrong), "locus: dot: operand shapes [2, 3] and [4] do not broadcast (a rank-1 operand "
                                      "is a row and must match the columns; col(v) is a column and must match the rows)");
}

// Above backend::serial_threshold elements the host runs rank-2 expressions in parallel row by row,
// long rows in pieces of 4096 columns (broadcasts indexed by row and column, no division), and
// axis-0 reductions in column blocks of 64: odd extents so the last piece and block are partial;
// in place so the destination aliases an operand.
TEMPLATE_LIST_TEST_CASE("large broadcasts and column reductions match a double-precision loop",
                        "[ops][broadcast][reduce][axis]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const auto check_shape = [](std::size_t rows, std::size_t cols) {
    INFO("shape [" << rows << ", " << cols << "]");
    REQUIRE(rows * cols >= backend::serial_threshold);
    const auto hm = random_values<T>(rows * cols, -1, 1, 21);
    const auto hb = random_values<T>(cols, -1, 1, 22);
    const auto hs = random_values<T>(rows, -1, 1, 23);
    tensor<T, D, 2> m(shape{rows, cols}, hm);
    const tensor<T, D> bias(shape{cols}, hb), scale(shape{rows}, hs);
    m = relu(m + bias) * col(scale) - col(scale) * bias * T(0.5);
    const auto got = m.to_vector();
    const auto col_sum = on<D>(sum<0>(m)).to_vector();
    const auto col_sum_expr = on<D>(sum<0>(m * col(scale) + bias)).to_vector();
    const auto col_arg = on<D>(argmax<0>(m)).to_vector();
    const auto col_max = on<D>(max<0>(m)).to_vector();
    std::vector<double> want(rows * cols);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c) {
        const double v = double(hm[r * cols + c]) + double(hb[c]);
        want[r * cols + c] = (v > 0 ? v : 0) * double(hs[r]) - 0.5 * double(hs[r]) * double(hb[c]);
      }
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < want.size(); ++i) wrong += !close(got[i], want[i], rel_tol<T>());
    CHECK(wrong == 0);
    std::size_t wrong_columns = 0;
    for (std::size_t c = 0; c < cols; ++c) {
      double s = 0, se = 0;
      std::size_t arg = 0;
      for (std::size_t r = 0; r < rows; ++r) {
        s += double(got[r * cols + c]);
        se += double(got[r * cols + c]) * double(hs[r]) + double(hb[c]);
        if (got[r * cols + c] > got[arg * cols + c]) arg = r;
      }
      wrong_columns += !close(col_sum[c], s, 1e-4) || !close(col_sum_expr[c], se, 1e-4) ||
                       col_arg[c] != static_cast<std::int64_t>(arg) || col_max[c] != got[arg * cols + c];
    }
    CHECK(wrong_columns == 0);
  };
  check_shape(211, 149);
  check_shape(3, 9001);  // rows of three pieces, the last 809 columns
  check_shape(1, 20000);
}

TEMPLATE_LIST_TEST_CASE("max, min and argmax follow numpy with NaN and infinities, and empty inputs are refused",
                        "[ops][reduce][nan]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  tensor<T, D> just_nan{nan};
  CHECK(std::isnan(on<D>(max(just_nan)).item()));
  CHECK(std::isnan(on<D>(min(just_nan)).item()));
  for (std::size_t at : {std::size_t(0), std::size_t(3), std::size_t(5000)}) {
    std::vector<T> h(6000, T(1));
    h[at] = nan;
    h[at + (5999 - at) / 2 + 1] = nan;  // a second NaN later: argmax names the first
    tensor<T, D> x(h);
    CHECK(std::isnan(on<D>(max(x)).item()));
    CHECK(std::isnan(on<D>(min(x)).item()));
    CHECK(on<D>(argmax(x)).item() == std::int64_t(at));
  }
  tensor<T, D> minus_inf{-inf, -inf};
  CHECK(on<D>(max(minus_inf)).item() == -inf);
  tensor<T, D> plus_inf{inf, inf};
  CHECK(on<D>(min(plus_inf)).item() == inf);
  CHECK(on<D>(argmax(minus_inf)).item() == 0);
  tensor<T, D> empty(shape{0});
  CHECK_THROWS_WITH((void)on<D>(max(empty)), "locus: max of an empty input (shape [0]): it has no elements to choose from");
  CHECK_THROWS_AS((void)on<D>(min(empty)), shape_error);
  CHECK_THROWS_AS((void)on<D>(argmax(empty)), shape_error);
  tensor<T, D, 2> no_cols(shape{3, 0});
  CHECK_THROWS_AS((void)on<D>(max<1>(no_cols)), shape_error);
  CHECK(on<D>(max<0>(no_cols)).empty());  // no columns: nothing to choose, nothing asked
  CHECK(on<D>(sum(empty)).item() == T(0));  // a sum has its identity
}

TEST_CASE("integer and bool sums accumulate in 64 bits, as numpy", "[ops][reduce][integers]") {
  tensor<std::int32_t, cpu> big(shape{3}, std::numeric_limits<std::int32_t>::max());
  static_assert(std::is_same_v<decltype(on<cpu>(sum(big)))::value_type, std::int64_t>);
  CHECK(on<cpu>(sum(big)).item() == 3 * std::int64_t{std::numeric_limits<std::int32_t>::max()});
  CHECK(on<cpu>(mean(big)).item() == double(std::numeric_limits<std::int32_t>::max()));
  tensor<std::uint8_t, cpu> bytes(shape{1000}, std::uint8_t(200));
  static_assert(std::is_same_v<decltype(on<cpu>(sum(bytes)))::value_type, std::uint64_t>);
  CHECK(on<cpu>(sum(bytes)).item() == 200000u);
  tensor<bool, cpu> truths{true, true, true};
  CHECK(on<cpu>(sum(truths)).item() == 3);
  tensor<std::int32_t, cpu> negative{-5, -7};
  CHECK(on<cpu>(sum(negative)).item() == -12);
  CHECK(on<cpu>(mean(negative)).item() == -6.0);
  // int64 wraps modulo 2^64 (no undefined behaviour, UBSan is quiet in the asan stage).
  tensor<std::int64_t, cpu> wrap{std::numeric_limits<std::int64_t>::max(), 1};
  CHECK(on<cpu>(sum(wrap)).item() == std::numeric_limits<std::int64_t>::min());
  // A mean adds in double, as numpy's: it does not wrap with the sum.
  tensor<std::int64_t, cpu> high(shape{2}, std::numeric_limits<std::int64_t>::max());
  tensor<std::uint64_t, cpu> uhigh(shape{2}, std::numeric_limits<std::uint64_t>::max());
  tensor<std::int64_t, cpu> low(shape{2}, std::numeric_limits<std::int64_t>::min());
  CHECK(on<cpu>(mean(high)).item() == 9223372036854775807.0);
  CHECK(on<cpu>(mean(uhigh)).item() == 18446744073709551615.0);
  CHECK(on<cpu>(mean(low)).item() == -9223372036854775808.0);
  tensor<std::int64_t, cpu, 2> rows{{std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::max()},
                                    {-3, 4}};
  CHECK(on<cpu>(mean<1>(rows)).to_vector() == std::vector<double>{9223372036854775807.0, 0.5});
  CHECK(on<cpu>(mean(truths)).item() == 1.0);
#if LOCUS_HAS_GPUS
  CHECK(on<gpu<0>>(mean(to<gpu<0>>(high))).item() == 9223372036854775807.0);
  CHECK(on<gpu<1>>(mean<1>(to<gpu<1>>(rows))).to_vector() == std::vector<double>{9223372036854775807.0, 0.5});
  CHECK(on<gpu<0>>(sum(to<gpu<0>>(big))).item() == 3 * std::int64_t{std::numeric_limits<std::int32_t>::max()});
  CHECK(on<gpu<1>>(sum(to<gpu<1>>(truths))).item() == 3);
#endif
}
