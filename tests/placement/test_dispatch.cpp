// Run-time device choice: dispatch<MaxGpus>(id, f), with_devices<MaxGpus>(count, f),
// available_device_ids().
#include "../common/test_support.hpp"

#include <string>
#include <type_traits>
#include <vector>

using namespace locus;

namespace {
/// Sums {1, 2, 3} * 2 on device D: a value that does not depend on D.
struct sum_on {
  int* calls = nullptr;
  template <device D>
  double operator()() const {
    ++*calls;
    auto x = to<D>(tensor<float, cpu>{1.f, 2.f, 3.f});
    return static_cast<double>(on<D>(sum(x * 2.f)).item());
  }
};
constexpr device_id gpu_id(int n) { return {device_kind::gpu, n}; }
}  // namespace

TEST_CASE("available_device_ids lists the devices as device_ids, the cpu first", "[device][dispatch]") {
  const auto ids = available_device_ids();
  const auto names = available_devices();
  REQUIRE(ids.size() == names.size());
  REQUIRE(ids.size() == static_cast<std::size_t>(1 + gpu_count()));
  CHECK(ids[0] == id_of<cpu>);
  CHECK(ids[0].full_name() == "/job:localhost/replica:0/task:0/device:CPU:0");
  for (std::size_t i = 1; i < ids.size(); ++i) {
    CHECK(ids[i] == gpu_id(static_cast<int>(i - 1)));
    CHECK(ids[i].name() == "/gpu:" + std::to_string(i - 1));
  }
}

TEST_CASE("dispatch calls f with the device type a run-time id names", "[device][dispatch]") {
  int calls = 0;
  for (const device_id id : available_device_ids()) {
    std::string name = dispatch<4>(id, [&]<device D>() { return id_of<D>.type_name(); });
    CHECK(name == id.type_name());
    CHECK(dispatch<4>(id, sum_on{&calls}) == 12.0);
  }
  CHECK(calls == 1 + gpu_count());
  // void results, and an lvalue function object.
  int seen = -1;
  auto note = [&]<device D>() { seen = D::index; };
  dispatch<2>(id_of<cpu>, note);
  CHECK(seen == 0);
#if LOCUS_HAS_GPUS
  dispatch<2>(gpu_id(1), note);
  CHECK(seen == 1);
#endif
}

TEST_CASE("dispatch refuses an id beyond its bound, of no device, or not in this process, before f runs",
          "[device][dispatch][errors]") {
  int calls = 0;
  const sum_on f{&calls};
#if LOCUS_HAS_GPUS
  CHECK_THROWS_WITH(dispatch<2>(gpu_id(3), f),
                    "locus: dispatch<2>: /job:localhost/replica:0/task:0/device:GPU:3 (gpu<3>) is beyond the "
                    "compile-time bound: gpu<0> to gpu<1> were compiled; raise MaxGpus");
  CHECK_THROWS_WITH(dispatch<0>(gpu_id(0), f),
                    "locus: dispatch<0>: /job:localhost/replica:0/task:0/device:GPU:0 (gpu<0>) is beyond the "
                    "compile-time bound: no GPU was compiled; raise MaxGpus");
  const int gpus = gpu_count();
  REQUIRE(gpus < 8);
  try {
    (void)dispatch<8>(gpu_id(gpus), f);
    FAIL("dispatched to a GPU this process does not have");
  } catch (const device_error& e) {
    const std::string what = e.what();
    CHECK(what.find("(gpu<" + std::to_string(gpus) + ">) is not available in this process; available devices are [") !=
          std::string::npos);
  }
#else
  CHECK_THROWS_WITH(dispatch<4>(gpu_id(0), f),
                    "locus: dispatch<4>: /job:localhost/replica:0/task:0/device:GPU:0 (gpu<0>) is beyond the "
                    "compile-time bound: this build has no GPUs (nvcc, or LOCUS_EMULATE_GPUS=1)");
#endif
  CHECK_THROWS_WITH(dispatch<4>(gpu_id(-1), f),
                    "locus: dispatch<4>: index -1 names no GPU (the cpu is index 0, GPUs count from 0)");
  CHECK_THROWS_WITH(dispatch<4>(device_id{device_kind::cpu, 1}, f),
                    "locus: dispatch<4>: index 1 names no cpu (the cpu is index 0, GPUs count from 0)");
  CHECK(calls == 0);
}

#if LOCUS_HAS_GPUS
TEST_CASE("a constrained f is compiled for the devices it takes, the others throw", "[device][dispatch]") {
  auto gpus_only = [&]<device D>()
    requires is_gpu_v<D>
  { return D::index; };
  CHECK_THROWS_WITH(dispatch<2>(id_of<cpu>, gpus_only), "locus: dispatch: f does not take <cpu>");
  CHECK(dispatch<2>(gpu_id(1), gpus_only) == 1);
}

TEST_CASE("with_devices calls f with the first count GPUs as a type list", "[device][dispatch]") {
  const auto names = [&]<device... Ds>() {
    std::vector<std::string> v{id_of<Ds>.type_name()...};
    return v;
  };
  CHECK(with_devices<4>(1, names) == std::vector<std::string>{"gpu<0>"});
  CHECK(with_devices<4>(2, names) == std::vector<std::string>{"gpu<0>", "gpu<1>"});
  // The devices are usable: the same sum on each, added up.
  int calls = 0;
  const double total = with_devices<2>(2, [&]<device... Ds>() { return (sum_on{&calls}.operator()<Ds>() + ...); });
  CHECK(total == 24.0);
  CHECK(calls == 2);
}

TEST_CASE("with_devices refuses a count outside its bound or past the process's GPUs, before f runs",
          "[device][dispatch][errors]") {
  bool ran = false;
  const auto f = [&]<device... Ds>() { ran = true; };
  CHECK_THROWS_WITH(with_devices<4>(0, f),
                    "locus: with_devices<4>(0, f): the count must be 1 to 4 (the compile-time bound; raise MaxGpus for "
                    "more)");
  CHECK_THROWS_WITH(with_devices<4>(5, f),
                    "locus: with_devices<4>(5, f): the count must be 1 to 4 (the compile-time bound; raise MaxGpus for "
                    "more)");
  const int gpus = gpu_count();
  REQUIRE(gpus < 8);
  try {
    with_devices<8>(gpus + 1, f);
    FAIL("listed more GPUs than the process has");
  } catch (const device_error& e) {
    CHECK(std::string(e.what()).find("(gpu<" + std::to_string(gpus) + ">) is not available in this process") !=
          std::string::npos);
  }
  CHECK_FALSE(ran);
}
#endif
