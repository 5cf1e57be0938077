#include "../common/test_support.hpp"

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

using namespace locus;
using locus_test::log_capture;
using locus_test::logged;

namespace {

// A host-only operation: C++17's special math functions have no device implementation.
struct bessel_j0 {
  static constexpr const char* name = "bessel_j0";
  static constexpr const char* type = "BesselJ0";
  static constexpr bool host_only = true;
  float operator()(float x) const { return static_cast<float>(std::cyl_bessel_j(0.0, static_cast<double>(x))); }
};

struct my_op {};

}  // namespace

// A user's own kernel availability: my_op has no double kernel on GPUs.
template <int N>
struct locus::has_kernel<my_op, locus::gpu<N>, double> : std::false_type {};

TEST_CASE("on<cpu> evaluates on the CPU and the result lives there", "[placement]") {
  tensor<float, cpu> a{1.f, 2.f, 3.f}, b{1.f, 2.f, 3.f};
  auto c = on<cpu>(a + b);
  STATIC_REQUIRE(std::is_same_v<decltype(c), tensor<float, cpu>>);
  CHECK(c.to_vector() == std::vector<float>{2.f, 4.f, 6.f});
  auto e = eval(a * b);  // where the operands live
  STATIC_REQUIRE(std::is_same_v<decltype(e), tensor<float, cpu>>);
  CHECK(e.to_vector() == std::vector<float>{1.f, 4.f, 9.f});
}

TEST_CASE("kernel availability defaults and user specialisations", "[placement][kernel]") {
  STATIC_REQUIRE(has_kernel_v<ops::add, cpu, long double>);
  STATIC_REQUIRE(has_kernel_v<ops::mapped<bessel_j0>, cpu, float>);
  STATIC_REQUIRE(has_kernel_v<my_op, cpu, double>);
#if LOCUS_HAS_GPUS
  STATIC_REQUIRE(has_kernel_v<ops::add, gpu<0>, float>);
  STATIC_REQUIRE(has_kernel_v<ops::exp, gpu<3>, double>);
  STATIC_REQUIRE(!has_kernel_v<ops::add, gpu<0>, long double>);
  STATIC_REQUIRE(!has_kernel_v<ops::mapped<bessel_j0>, gpu<1>, float>);
  STATIC_REQUIRE(!has_kernel_v<my_op, gpu<2>, double>);
  STATIC_REQUIRE(has_kernel_v<my_op, gpu<2>, float>);
#endif
}

TEST_CASE("the placement log is off by default and writes TensorFlow's lines when on", "[placement][log]") {
  tensor<float, cpu> a{1.f, 2.f, 3.f}, b{4.f, 5.f, 6.f};
  a.set_name("a");
  b.set_name("b");
  {
    std::vector<std::string> lines;
    auto previous = set_placement_sink([&](std::string_view l) { lines.emplace_back(l); });
    log_device_placement(false);
    auto c = on<cpu>(a + b);
    CHECK(lines.empty());
    set_placement_sink(std::move(previous));
  }
  log_capture log;
  auto c = on<cpu>(a * b + a * 2.f);
  const std::string cpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";
  CHECK(log.lines == std::vector<std::string>{"a: (Const): " + cpu0, "b: (Const): " + cpu0, "mul: (Mul): " + cpu0,
                                              "a: (Const): " + cpu0, "Const: (Const): " + cpu0,
                                              "mul_1: (Mul): " + cpu0, "add: (Add): " + cpu0});
}

TEST_CASE("scoped_placement_log restores the previous state", "[placement][log]") {
  log_device_placement(false);
  {
    log_capture log;
    CHECK(log_device_placement());
  }
  CHECK_FALSE(log_device_placement());
}

namespace {
/// Replaces the process's sink for a test, and turns the switch off again at the end.
struct sink_capture {
  std::vector<std::string> lines;
  placement_sink previous = set_placement_sink([this](std::string_view l) { lines.emplace_back(l); });
  ~sink_capture() {
    log_device_placement(false);
    set_placement_sink(std::move(previous));
  }
};
}  // namespace

TEST_CASE("log_device_placement({.first = N}) logs N whole evaluations, then turns itself off",
          "[placement][log][limit]") {
  tensor<float, cpu> a{1.f, 2.f}, b{3.f, 4.f};
  sink_capture log;
  log_device_placement(placement_log_options{.first = 2});
  CHECK(log_device_placement());
  for (int i = 0; i < 5; ++i) {
    auto c = on<cpu>(a + b);  // 3 lines: a, b, add
    CHECK(c.to_vector() == std::vector<float>{4.f, 6.f});
  }
  CHECK(log.lines.size() == 6);
  CHECK(log.lines.back() == "add: (Add): " + id_of<cpu>.full_name());
  CHECK_FALSE(log_device_placement());
  // An assignment and a reduction count one each; true is unlimited again.
  log_device_placement(placement_log_options{.first = 1});
  tensor<float, cpu> c(shape{2});
  c = a * b;
  auto s = on<cpu>(sum(a));
  CHECK(log.lines.size() == 9);
  CHECK(log.lines.back() == "mul: (Mul): " + id_of<cpu>.full_name());
  log_device_placement(true);
  for (int i = 0; i < 3; ++i) c = a * b;
  CHECK(log.lines.size() == 18);
  CHECK(log_device_placement());
  // {.first = 0} is off, and a later limit replaces the remaining one.
  log_device_placement(placement_log_options{.first = 0});
  CHECK_FALSE(log_device_placement());
  c = a * b;
  CHECK(log.lines.size() == 18);
  log_device_placement(placement_log_options{.first = 100});
  log_device_placement(placement_log_options{.first = 1});
  c = a * b;
  c = a * b;
  CHECK(log.lines.size() == 21);
}

TEST_CASE("a scoped_placement_log with a limit stops logging when it is spent, while it lives",
          "[placement][log][limit]") {
  tensor<float, cpu> a{1.f, 2.f};
  log_device_placement(false);
  std::vector<std::string> lines;
  {
    scoped_placement_log scope(placement_log_options{.first = 3}, [&](std::string_view l) { lines.emplace_back(l); });
    CHECK(log_device_placement());
    for (int i = 0; i < 10; ++i) auto r = on<cpu>(relu(a));  // 2 lines: a, relu
    CHECK(lines.size() == 6);
    CHECK_FALSE(log_device_placement());
    {
      // A newer scope turns it on again, for itself; the lines still go to the newest sink.
      scoped_placement_log more(placement_log_options{.first = 1});
      CHECK(log_device_placement());
      auto r = on<cpu>(relu(a));
      auto q = on<cpu>(relu(a));
      CHECK(lines.size() == 8);
    }
    auto r = on<cpu>(relu(a));
    CHECK(lines.size() == 8);
  }
  CHECK_FALSE(log_device_placement());
  // A scope without a limit on top of a spent one is unlimited.
  {
    scoped_placement_log spent(placement_log_options{.first = 0}, [&](std::string_view l) { lines.emplace_back(l); });
    CHECK_FALSE(log_device_placement());
    auto r = on<cpu>(relu(a));
    CHECK(lines.size() == 8);
    scoped_placement_log all;
    for (int i = 0; i < 4; ++i) auto q = on<cpu>(relu(a));
    CHECK(lines.size() == 16);
  }
}

TEST_CASE("a loss and the mean it takes are one evaluation of a limited log", "[placement][log][limit]") {
  tensor<float, cpu, 2> z{{1.f, 2.f}, {3.f, 0.f}};
  tensor<int, cpu> labels{1, 0};
  sink_capture log;
  log_device_placement(placement_log_options{.first = 1});
  const auto first = softmax_cross_entropy(z, labels);
  CHECK(first.gradient.shape() == z.shape());
  REQUIRE(!log.lines.empty());
  CHECK(log.lines.front() == "softmax_cross_entropy: (SoftmaxCrossEntropyWithLogits): " + id_of<cpu>.full_name());
  CHECK(log.lines.back().find("(Mean)") != std::string::npos);
  const auto n = log.lines.size();
  auto again = softmax_cross_entropy(z, labels);
  CHECK(log.lines.size() == n);
}

#if LOCUS_HAS_GPUS
TEST_CASE("the copies implicit_transfers makes belong to their evaluation in a limited log",
          "[placement][log][limit][gpu]") {
  tensor<float, gpu<0>> x{1.f, 2.f, 3.f};
  tensor<float, cpu> h{10.f, 20.f, 30.f};
  tensor<float, gpu<1>> y{1.f, 1.f, 1.f};
  sink_capture log;
  log_device_placement(placement_log_options{.first = 2});
  auto z = on<gpu<1>, implicit_transfers>(x + h * y);  // 2 copies + 5 nodes
  CHECK(log.lines.size() == 7);
  CHECK(log.lines.front().rfind("transfer: (Copy): ", 0) == 0);
  auto moved = to<gpu<0>>(z);  // a transfer on its own: the second evaluation
  CHECK(log.lines.size() == 8);
  CHECK(log.lines.back().rfind("transfer: (Copy): ", 0) == 0);
  auto w = on<gpu<1>, implicit_transfers>(x + h * y);
  CHECK(log.lines.size() == 8);
  CHECK_FALSE(log_device_placement());
}

TEST_CASE("the classic scenario: a on gpu<0>, b and the add on gpu<1>", "[placement][gpu]") {
  tensor<float, cpu> ha{1.f, 2.f, 3.f}, hb{1.f, 2.f, 3.f};
  tensor<float, gpu<0>> x = to<gpu<0>>(ha);
  tensor<float, gpu<1>> y = to<gpu<1>>(hb);
  x.set_name("x");
  y.set_name("y");
  reset_transfer_stats();
  log_capture log;
  auto z = on<gpu<1>>(to<gpu<1>>(x) + y);
  STATIC_REQUIRE(std::is_same_v<decltype(z), tensor<float, gpu<1>>>);
  CHECK(z.to_vector() == std::vector<float>{2.f, 4.f, 6.f});
  const device_id g0{device_kind::gpu, 0}, g1{device_kind::gpu, 1};
  std::string transfer = "transfer: (Copy): " + g0.full_name() + " -> " + g1.full_name() + ", 12 bytes";
  if (LOCUS_EMULATE_GPUS) transfer += " (emulated)";
  CHECK(log.lines == std::vector<std::string>{transfer, "x: (Const): " + logged(g1), "y: (Const): " + logged(g1),
                                              "add: (Add): " + logged(g1)});
  const auto stats = transfer_stats();
  REQUIRE(stats.count({g0, g1}) == 1);
  CHECK(stats.at({g0, g1}).bytes == 12);
}

TEST_CASE("implicit_transfers copies foreign operands and logs each copy", "[placement][gpu]") {
  tensor<float, gpu<0>> x{1.f, 2.f, 3.f};
  tensor<float, cpu> h{10.f, 20.f, 30.f};
  tensor<float, gpu<1>> y{1.f, 1.f, 1.f};
  reset_transfer_stats();
  log_capture log;
  auto z = on<gpu<1>, implicit_transfers>(x + h * y);
  STATIC_REQUIRE(std::is_same_v<decltype(z), tensor<float, gpu<1>>>);
  CHECK(z.to_vector() == std::vector<float>{11.f, 22.f, 33.f});
  const device_id g0{device_kind::gpu, 0}, g1{device_kind::gpu, 1};
  const auto stats = transfer_stats();
  CHECK(stats.at({g0, g1}).bytes == 12);
  CHECK(stats.at({id_of<cpu>, g1}).bytes == 12);
  CHECK(stats.size() == 2);
  CHECK(log.contains("transfer: (Copy): " + g0.full_name() + " -> " + g1.full_name() + ", 12 bytes"));
  CHECK(log.contains("transfer: (Copy): " + id_of<cpu>.full_name() + " -> " + g1.full_name() + ", 12 bytes"));
  CHECK(log.lines.back() == "add: (Add): " + logged(g1));
}

TEST_CASE("soft placement runs an operation without a GPU kernel on the CPU", "[placement][soft]") {
  tensor<float, gpu<0>> x{0.f, 1.f, 2.f};
  reset_transfer_stats();
  log_capture log;
  auto r = on<gpu<0>, soft_placement>(map(bessel_j0{}, x));
  STATIC_REQUIRE(std::is_same_v<decltype(r), tensor<float, cpu>>);
  const auto v = r.to_vector();
  CHECK(locus_test::all_close(v, {1.0, 0.7651976866, 0.2238907791}, 1e-6));
  const device_id g0{device_kind::gpu, 0};
  CHECK(log.contains("soft placement: BesselJ0 has no kernel for " + logged(g0) + "; running on " +
                     id_of<cpu>.full_name()));
  CHECK(log.lines.back() == "bessel_j0: (BesselJ0): " + id_of<cpu>.full_name());
  CHECK(transfer_stats().at({g0, id_of<cpu>}).bytes == 12);
  // With every kernel available, soft placement changes nothing.
  auto s = on<gpu<0>, soft_placement>(x * 2.f);
  STATIC_REQUIRE(std::is_same_v<decltype(s), tensor<float, gpu<0>>>);
}

TEST_CASE("every log line about an emulated GPU says so", "[placement][log][emulated]") {
  tensor<float, gpu<1>> y{1.f};
  log_capture log;
  auto z = on<gpu<1>>(y + 1.f);
  REQUIRE(!log.lines.empty());
  for (const auto& l : log.lines) CHECK((l.find("(emulated)") != std::string::npos) == (LOCUS_EMULATE_GPUS != 0));
}

TEST_CASE("eval runs where the operands live", "[placement][gpu]") {
  tensor<float, gpu<1>> y{1.f, 4.f};
  auto r = eval(sqrt(y));
  STATIC_REQUIRE(std::is_same_v<decltype(r), tensor<float, gpu<1>>>);
  CHECK(r.to_vector() == std::vector<float>{1.f, 2.f});
}
#endif
