// Printing: operator<<, to_string with print_options, std::format where the library has it.
#include "../common/test_support.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>
#if defined(__cpp_lib_format)
#  include <format>
#endif

using namespace locus;

namespace {
template <class X>
std::string streamed(const X& x) {
  std::ostringstream os;
  os << x;
  return os.str();
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("tensors print their type, shape and values as numpy lays them out", "[tensor][print]",
                        locus_test::devices) {
  using D = TestType;
  const std::string dev = id_of<D>.type_name();
  tensor<float, D, 2> m{{1.5f, 2.f, -3.25f}, {4.f, 5.f, 6.f}};
  CHECK(streamed(m) == "tensor<float, " + dev + ", 2> [2, 3]\n"
                       "[[ 1.50,  2.00, -3.25],\n"
                       " [ 4.00,  5.00,  6.00]]");
  CHECK(to_string(m) == streamed(m));
  CHECK(streamed(m.row(1)) == "tensor_view<float, " + dev + "> [3]\n[4., 5., 6.]");
  CHECK(streamed(tensor<int, D>{-12, 3, 450}) == "tensor<int, " + dev + "> [3]\n[-12,   3, 450]");
  tensor<int, D, 3> cube(shape{2, 2, 2}, 7);
  CHECK(streamed(cube) == "tensor<int, " + dev + ", 3> [2, 2, 2]\n"
                          "[[[7, 7],\n"
                          "  [7, 7]],\n"
                          "\n"
                          " [[7, 7],\n"
                          "  [7, 7]]]");
  auto total = on<D>(sum(m));
  CHECK(streamed(total) == "tensor<float, " + dev + ", 0> []\n15.25");
}

TEST_CASE("floating-point elements: a common format, nan and inf, scientific when magnitudes call for it",
          "[tensor][print]") {
  constexpr float inf = std::numeric_limits<float>::infinity();
  tensor<float, cpu> odd{std::numeric_limits<float>::quiet_NaN(), inf, -inf, 1.f / 3.f, -0.f};
  CHECK(streamed(odd) == "tensor<float, cpu> [5]\n[        nan,         inf,        -inf,  0.33333334, -0.00000000]");
  CHECK(streamed(tensor<double, cpu>{1e10, 1.5, 2e-5}) == "tensor<double, cpu> [3]\n[1.0e+10, 1.5e+00, 2.0e-05]");
  CHECK(streamed(tensor<double, cpu>{1e8}) == "tensor<double, cpu> [1]\n[1.e+08]");
  CHECK(streamed(tensor<double, cpu>{0.001, 0.5}) == "tensor<double, cpu> [2]\n[0.001, 0.500]");
  CHECK(streamed(tensor<double, cpu>{0.0001, 0.5}) == "tensor<double, cpu> [2]\n[1.e-04, 5.e-01]");  // ratio > 1000
  CHECK(streamed(tensor<double, cpu>{0.1, 0.25}) == "tensor<double, cpu> [2]\n[0.10, 0.25]");
  CHECK(streamed(tensor<float, cpu>{0.f, 0.f}) == "tensor<float, cpu> [2]\n[0., 0.]");
  CHECK(streamed(tensor<float, cpu>(shape{2}, std::numeric_limits<float>::quiet_NaN())) ==
        "tensor<float, cpu> [2]\n[nan, nan]");
  CHECK(to_string(tensor<double, cpu>{1.0 / 3.0, 2.0}, {.precision = 3}) == "tensor<double, cpu> [2]\n[0.333, 2.000]");
}

TEST_CASE("integers, characters and bools print as numbers and words", "[tensor][print]") {
  CHECK(streamed(tensor<bool, cpu>{true, false}) == "tensor<bool, cpu> [2]\n[ true, false]");
  CHECK(streamed(tensor<signed char, cpu>{-1, 65}) == "tensor<signed char, cpu> [2]\n[-1, 65]");
  CHECK(streamed(tensor<std::uint8_t, cpu>{255, 0}) == "tensor<unsigned char, cpu> [2]\n[255,   0]");
  CHECK(streamed(tensor<long long, cpu>{std::numeric_limits<long long>::min()}) ==
        "tensor<long long, cpu> [1]\n[-9223372036854775808]");
  CHECK(streamed(tensor<unsigned long long, cpu>{std::numeric_limits<unsigned long long>::max()}) ==
        "tensor<unsigned long long, cpu> [1]\n[18446744073709551615]");
}

TEST_CASE("empty tensors print their shape", "[tensor][print]") {
  CHECK(streamed(tensor<float, cpu>(shape{0})) == "tensor<float, cpu> [0]\n[]");
  CHECK(streamed(tensor<float, cpu, 2>(shape{2, 0})) == "tensor<float, cpu, 2> [2, 0]\n[]");
  CHECK(streamed(tensor<float, cpu, 0>{}) == "tensor<float, cpu, 0> []\n(empty)");
  tensor<double, cpu, 2> m(shape{3, 2}, 1.0);
  CHECK(streamed(m.rows(1, 1)) == "tensor_view<double, cpu, 2> [0, 2]\n[]");
}

TEST_CASE("large tensors are summarised by their edges, numpy's threshold and edge items", "[tensor][print]") {
  tensor<int, cpu> v(shape{2000});
  for (int i = 0; i < 2000; ++i) v(i) = i;
  CHECK(streamed(v) == "tensor<int, cpu> [2000]\n[   0,    1,    2, ..., 1997, 1998, 1999]");
  // 1000 elements is the threshold itself: all of them, wrapped at 75 columns.
  tensor<int, cpu> k(shape{1000}, 5);
  const std::string all = streamed(k);
  CHECK(all.find("...") == std::string::npos);
  std::size_t lines = 1, column = 0, longest = 0;
  for (const char c : all) {
    if (c == '\n') {
      ++lines;
      column = 0;
    } else {
      longest = std::max(longest, ++column);
    }
  }
  CHECK(longest == 75);
  CHECK(lines == 1 + 40);  // the header, then 25 entries of 3 characters per line

  tensor<int, cpu, 2> m(shape{100, 100});
  for (int i = 0; i < 100; ++i)
    for (int j = 0; j < 100; ++j) m(i, j) = i * 100 + j;
  CHECK(streamed(m) == "tensor<int, cpu, 2> [100, 100]\n"
                       "[[   0,    1,    2, ...,   97,   98,   99],\n"
                       " [ 100,  101,  102, ...,  197,  198,  199],\n"
                       " [ 200,  201,  202, ...,  297,  298,  299],\n"
                       " ...,\n"
                       " [9700, 9701, 9702, ..., 9797, 9798, 9799],\n"
                       " [9800, 9801, 9802, ..., 9897, 9898, 9899],\n"
                       " [9900, 9901, 9902, ..., 9997, 9998, 9999]]");
  // Only an axis longer than twice the edge items is elided; the format comes from what is shown.
  tensor<double, cpu, 2> tall(shape{400, 3}, 0.5);
  tall(399, 2) = 2.25;
  CHECK(to_string(tall, {.edge_items = 2}) == "tensor<double, cpu, 2> [400, 3]\n"
                                              "[[0.50, 0.50, 0.50],\n"
                                              " [0.50, 0.50, 0.50],\n"
                                              " ...,\n"
                                              " [0.50, 0.50, 0.50],\n"
                                              " [0.50, 0.50, 2.25]]");
  CHECK(to_string(v, {.threshold = 5, .edge_items = 1}) == "tensor<int, cpu> [2000]\n[   0, ..., 1999]");
  CHECK(to_string(tensor<int, cpu>{1, 2, 3}, {.threshold = 2, .edge_items = 2}) == "tensor<int, cpu> [3]\n[1, 2, 3]");
  // edge_items so large that twice it wraps size_t: nothing is elided (it was laid out as 2 of 3 words).
  tensor<int, cpu> five(shape{5}, 7);
  CHECK(to_string(five, {.threshold = 1, .edge_items = (std::size_t{1} << 63) + 1}) ==
        "tensor<int, cpu> [5]\n[7, 7, 7, 7, 7]");
  CHECK(to_string(five, {.threshold = 1, .edge_items = std::size_t(-1)}) == "tensor<int, cpu> [5]\n[7, 7, 7, 7, 7]");
  CHECK(to_string(five, {.threshold = 1, .edge_items = 2}) == "tensor<int, cpu> [5]\n[7, 7, ..., 7, 7]");
}

TEST_CASE("a negative precision is refused by name", "[tensor][print][errors]") {
  const tensor<float, cpu> x{0.1f, 0.25f};
  CHECK_THROWS_AS(to_string(x, {.precision = -3}), config_error);
  CHECK_THROWS_WITH(to_string(x, {.precision = -3}),
                    "locus: print_options: precision is -3; it is the most fraction digits, 0 or more");
  CHECK(to_string(x, {.precision = 0}) == "tensor<float, cpu> [2]\n[0., 0.]");
}

#if LOCUS_HAS_GPUS
TEST_CASE("printing a GPU tensor copies what it shows to the host, counted as a transfer", "[tensor][print][gpu]") {
  tensor<float, gpu<1>> g{1.f, 2.f, 3.f};
  const device_id g1{device_kind::gpu, 1};
  reset_transfer_stats();
  CHECK(streamed(g) == "tensor<float, gpu<1>> [3]\n[1., 2., 3.]");
  CHECK(transfer_stats().at({g1, id_of<cpu>}).bytes == 12);
  tensor<float, gpu<1>, 2> big(shape{1000, 1000}, 1.f);
  reset_transfer_stats();
  locus_test::log_capture log;
  (void)to_string(big);
  const auto moved = transfer_stats().at({g1, id_of<cpu>});
  CHECK(moved.bytes == 36 * sizeof(float));  // 6 rows of 3 + 3 shown
  CHECK(moved.copies == 1);
  REQUIRE(log.lines.size() == 1);
  CHECK(log.lines[0].rfind("transfer: (Copy): " + g1.full_name() + " -> " + id_of<cpu>.full_name() + ", 144 bytes", 0) ==
        0);
}
#endif

#if defined(__cpp_lib_format)
TEST_CASE("std::format prints tensors and views as operator<< does", "[tensor][print][format]") {
  tensor<int, cpu, 2> m{{1, 2}, {3, 4}};
  CHECK(std::format("{}", m) == streamed(m));
  CHECK(std::format("{}", m.row(1)) == streamed(m.row(1)));
  const tensor<int, cpu> seven{7};
  CHECK(std::format("{:>30}", seven) == std::string(30 - streamed(seven).size(), ' ') + streamed(seven));
}
#endif
