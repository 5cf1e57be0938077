// The classic scenarios of TensorFlow's device-placement guide, with placement checked at compile
// time. Run it with the log on (it turns it on itself) and read the lines it prints.
#include <locus/locus.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

using namespace locus;

namespace {

// C++17's Bessel function has no device implementation: no GPU kernel.
struct bessel_j0 {
  static constexpr const char* name = "bessel_j0";
  static constexpr const char* type = "BesselJ0";
  static constexpr bool host_only = true;
  float operator()(float x) const { return static_cast<float>(std::cyl_bessel_j(0.0, static_cast<double>(x))); }
};

template <class T, class D>
void print(const char* what, const tensor<T, D>& t) {
  std::printf("%s =", what);
  for (T v : t.to_vector()) std::printf(" %g", static_cast<double>(v));
  std::printf("   (on %s)\n", id_of<D>.full_name().c_str());
}

void section(const char* title) { std::printf("\n== %s\n", title); }

}  // namespace

int main() {
  // The log goes to stdout here so that it interleaves with the results.
  set_placement_sink([](std::string_view line) { std::printf("%.*s\n", static_cast<int>(line.size()), line.data()); });
  log_device_placement(true);

  if (gpu_count() < 2) configure_logical_gpus(2);  // two logical GPUs on one card, like tf.config
  std::printf("available devices:");
  for (const auto& d : available_devices()) std::printf(" %s", d.c_str());
  std::printf("\n");

  section("1. an add on the CPU, with log_device_placement on");
  auto a = tensor<float, cpu>{1.f, 2.f, 3.f}.named("a");
  auto b = tensor<float, cpu>{1.f, 2.f, 3.f}.named("b");
  auto c = on<cpu>(a + b);
  print("c", c);

  section("2. a device that does not exist");
  try {
    tensor<float, gpu<7>> nowhere(shape{3});
  } catch (const device_error& e) {
    std::printf("device_error: %s\n", e.what());
  }

  section("3. a on gpu<0>; b and the add on gpu<1>, with the explicit transfer");
  tensor<float, gpu<0>> x = to<gpu<0>>(a);
  tensor<float, gpu<1>> y = to<gpu<1>>(b);
  auto z = on<gpu<1>>(to<gpu<1>>(x) + y);
  print("z", z);
  auto w = on<gpu<1>>(exp(y) * 2.f - sqrt(y));  // one fused kernel, no temporaries
  print("w", w);
  // on<gpu<1>>(x + y) does not compile:
  //   locus: an operand lives on gpu<0> but the expression is bound to gpu<1>; copy it first with
  //   locus::to<gpu<1>>(x), or opt in with on<gpu<1>, locus::implicit_transfers>(expr)

  section("4. an operation without a GPU kernel, placed on gpu<0>");
  std::printf("has_kernel<BesselJ0, gpu<0>, float> = %s\n",
              has_kernel_v<ops::mapped<bessel_j0>, gpu<0>, float> ? "true" : "false");
  std::printf("on<gpu<0>>(map(bessel_j0{}, x)) is rejected at compile time:\n"
              "  locus: Could not satisfy explicit device specification '/device:GPU:0' because no supported "
              "kernel for GPU devices is available\n");
  auto j = on<gpu<0>, soft_placement>(map(bessel_j0{}, x));  // soft placement: runs on the CPU
  print("j", j);

  section("bytes moved between devices");
  for (const auto& [route, totals] : transfer_stats())
    std::printf("%s -> %s: %zu bytes in %zu copies\n", route.first.name().c_str(), route.second.name().c_str(),
                totals.bytes, totals.copies);
  return 0;
}
