#include "../common/test_support.hpp"

#include <cstdlib>
#include <string>
#include <vector>

using namespace locus;

namespace {

int env_or(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// The GPUs the environment CTest sets up should give: LOCUS_LOGICAL_GPUS over the physical ones.
int expected_gpus() {
#if LOCUS_EMULATE_GPUS
  const int physical = env_or("LOCUS_EMULATED_GPUS", 4);
#elif LOCUS_HAS_CUDA
  const int physical = backend::cuda::physical_device_count();
#else
  const int physical = 0;
#endif
  return physical == 0 ? 0 : env_or("LOCUS_LOGICAL_GPUS", physical);
}

}  // namespace

TEST_CASE("device tags are types with TensorFlow's names", "[device]") {
  STATIC_REQUIRE(device<cpu>);
  STATIC_REQUIRE(!device<int>);
  STATIC_REQUIRE(!device<device_id>);
  STATIC_REQUIRE(cpu::kind == device_kind::cpu);
  STATIC_REQUIRE(cpu::index == 0);
  CHECK(id_of<cpu>.name() == "/cpu:0");
  CHECK(id_of<cpu>.device_name() == "/device:CPU:0");
  CHECK(id_of<cpu>.full_name() == "/job:localhost/replica:0/task:0/device:CPU:0");
  CHECK(id_of<cpu>.type_name() == "cpu");
  const device_id g1{device_kind::gpu, 1};
  CHECK(g1.name() == "/gpu:1");
  CHECK(g1.device_name() == "/device:GPU:1");
  CHECK(g1.full_name() == "/job:localhost/replica:0/task:0/device:GPU:1");
  CHECK(g1.type_name() == "gpu<1>");
  CHECK(g1 != id_of<cpu>);
}

TEST_CASE("default_device follows TensorFlow's GPU-first rule at compile time", "[device]") {
#if LOCUS_HAS_CUDA
  STATIC_REQUIRE(std::is_same_v<default_device, gpu<0>>);
#else
  STATIC_REQUIRE(std::is_same_v<default_device, cpu>);
#endif
  STATIC_REQUIRE(std::is_same_v<tensor<float>::device_type, default_device>);
}

TEST_CASE("devices map to Thrust systems", "[device][backend]") {
  STATIC_REQUIRE(std::is_same_v<backend::thrust_system_t<cpu>, backend::host_system>);
#if defined(_OPENMP)
  STATIC_REQUIRE(std::is_same_v<backend::host_system, thrust::system::omp::tag>);
#endif
#if LOCUS_HAS_CUDA
  STATIC_REQUIRE(std::is_same_v<backend::thrust_system_t<gpu<1>>, thrust::system::cuda::tag>);
#elif LOCUS_EMULATE_GPUS
  STATIC_REQUIRE(device<gpu<3>>);
  STATIC_REQUIRE(is_gpu_v<gpu<3>>);
  STATIC_REQUIRE(gpu<3>::index == 3);
  STATIC_REQUIRE(std::is_same_v<backend::thrust_system_t<gpu<1>>, backend::host_system>);  // emulated: host
#endif
}

TEST_CASE("available_devices lists the CPU and every GPU in TensorFlow's form", "[device][registry]") {
  const int gpus = expected_gpus();
  CHECK(gpu_count() == gpus);
  const auto devs = available_devices();
  REQUIRE(devs.size() == static_cast<std::size_t>(1 + gpus));
  CHECK(devs[0] == "/job:localhost/replica:0/task:0/cpu:0");
  for (int i = 0; i < gpus; ++i) CHECK(devs[1 + i] == "/job:localhost/replica:0/task:0/gpu:" + std::to_string(i));
}

#if LOCUS_HAS_GPUS
TEST_CASE("touching a GPU past the count throws device_error listing the available devices", "[device][registry]") {
  const int gpus = gpu_count();
  REQUIRE(gpus < 7);
  std::string expected = "available devices are [ /job:localhost/replica:0/task:0/cpu:0";
  for (int i = 0; i < gpus; ++i) expected += ", /job:localhost/replica:0/task:0/gpu:" + std::to_string(i);
  expected += " ]";
  try {
    tensor<float, gpu<7>> t(shape{3});
    FAIL("gpu<7> should not exist");
  } catch (const device_error& e) {
    const std::string what = e.what();
    CHECK(what.find("locus: /job:localhost/replica:0/task:0/device:GPU:7 (gpu<7>) is not available") == 0);
    CHECK(what.find(expected) != std::string::npos);
  }
  CHECK_THROWS_AS(to<gpu<7>>(tensor<float, cpu>{1.f}), device_error);
}

TEST_CASE("logical GPUs run more GPUs than the machine has", "[device][registry][logical]") {
  const int physical = backend::registry::instance().physical_gpus();
  REQUIRE(physical >= 1);
  configure_logical_gpus(6);
  REQUIRE(gpu_count() == 6);
  for (int i = 0; i < 6; ++i) CHECK(backend::registry::instance().physical_of(i) == i % physical);
  {
    tensor<float, gpu<5>> x{1.f, 2.f, 3.f};
    auto y = on<gpu<5>>(x * 2.f);
    CHECK(y.to_vector() == std::vector<float>{2.f, 4.f, 6.f});
    CHECK(available_devices().back() == "/job:localhost/replica:0/task:0/gpu:5");
    // Logical GPUs keep arenas of their own even when they share a card.
    CHECK(memory_stats({device_kind::gpu, 5}).live_blocks == 2);
    CHECK(memory_stats({device_kind::gpu, 4}).live_blocks == 0);
    try {
      configure_logical_gpus(2);
      FAIL("reconfigured while tensors are alive");
    } catch (const device_error& e) {
      CHECK(std::string(e.what()).find("still holds tensors") != std::string::npos);
    }
    CHECK(gpu_count() == 6);
  }
  configure_logical_gpus(2);
  CHECK(gpu_count() == 2);
  CHECK_THROWS_AS((tensor<float, gpu<5>>(shape{1})), device_error);
  CHECK_THROWS_AS(configure_logical_gpus(0), device_error);
  configure_logical_gpus(physical);
}
#else
TEST_CASE("a host-only build has exactly one device and no logical GPUs", "[device][registry]") {
  CHECK(gpu_count() == 0);
  CHECK_THROWS_WITH(configure_logical_gpus(2),
                    "locus: configure_logical_gpus(2): this process has no physical GPU; available devices are "
                    "[ /job:localhost/replica:0/task:0/cpu:0 ]");
}
#endif

// Run by the tests env:malformed_gpu_variables* with LOCUS_EMULATED_GPUS=2x, " +2" or "2 ": cpu-only
// work runs; the first GPU use throws the variable's error, and so does every later one (not a
// crash, not a hang).
TEST_CASE("a malformed GPU variable leaves the cpu usable and names itself at the first GPU use", "[.env-bad]") {
  tensor<float, cpu> a{1.f, 2.f};
  CHECK(on<cpu>(a + 1.f).to_vector() == std::vector<float>{2.f, 3.f});
  CHECK(available_devices().size() == 1);
  CHECK(gpu_count() == 0);
#if LOCUS_HAS_GPUS
  for (int i = 0; i < 2; ++i)
    CHECK_THROWS_WITH((tensor<float, gpu<0>>{1.f}),
                      Catch::Contains(std::string("environment variable LOCUS_EMULATED_GPUS=\"") +
                                      std::getenv("LOCUS_EMULATED_GPUS") + "\" is not a device count"));
#endif
}

TEST_CASE("shapes refuse negative extents by name", "[device][shape][errors]") {
  CHECK_THROWS_WITH((shape{-1, 0}), "locus: shape: extent 0 is -1; extents are 0 or more");
  CHECK_THROWS_AS((shape{3, -2}), shape_error);
  CHECK_THROWS_AS((tensor<float, cpu, 2>(shape{2, -3})), shape_error);
  CHECK(shape{2, 3}.size() == 6);
  CHECK(shape{std::size_t{4}}.size() == 4);
}

#if LOCUS_HAS_GPUS
// Issue 27: below the typed surface a GPU is any_gpu, the thread's current device.
TEST_CASE("any_gpu is the current device of a device_scope, and nothing outside one", "[device][any_gpu]") {
  static_assert(device<any_gpu> && is_gpu_v<any_gpu> && is_dynamic_v<any_gpu>);
  static_assert(std::is_same_v<core_device_t<gpu<3>>, any_gpu> && std::is_same_v<core_device_t<cpu>, cpu>);
  CHECK_THROWS_WITH((void)device_id(id_of<any_gpu>),
                    Catch::StartsWith("locus: any_gpu used outside a device_scope"));
  CHECK_THROWS_AS((tensor<float, any_gpu>(shape{4}, 1.f)), device_error);
  const auto before0 = memory_stats(id_of<gpu<0>>).live_bytes, before1 = memory_stats(id_of<gpu<1>>).live_bytes;
  tensor<float, any_gpu> kept;
  {
    const device_scope one(id_of<gpu<1>>);
    CHECK(device_id(id_of<any_gpu>) == id_of<gpu<1>>);
    CHECK(id_of<any_gpu>.full_name() == "/job:localhost/replica:0/task:0/device:GPU:1");
    tensor<float, any_gpu> t(shape{1000}, 2.f);
    CHECK(memory_stats(id_of<gpu<1>>).live_bytes > before1);
    CHECK(memory_stats(id_of<gpu<0>>).live_bytes == before0);
    CHECK_NOTHROW((void)make_view<gpu<1>>(t.data(), shape{1000}));  // gpu<1>'s memory
    {
      const device_scope zero(id_of<gpu<0>>);  // scopes nest
      CHECK(device_id(id_of<any_gpu>) == id_of<gpu<0>>);
      // gpu<1>'s tensor taken as gpu<0>'s: refused, not silently misplaced
      CHECK_THROWS_AS((void)detail::retag<gpu<0>>(std::as_const(t).view()), device_error);
    }
    CHECK(device_id(id_of<any_gpu>) == id_of<gpu<1>>);
    // The log names the real GPU.
    std::string lines;
    {
      scoped_placement_log log([&](std::string_view l) { lines += std::string(l) + "\n"; });
      auto u = on<any_gpu>(t * 3.f);
      CHECK(u.to_vector() == std::vector<float>(1000, 6.f));
    }
    CHECK(lines.find("mul: (Mul): /job:localhost/replica:0/task:0/device:GPU:1") != std::string::npos);
    // Moved to the typed surface and back: the same memory, no copy.
    auto typed = detail::adopt<gpu<1>>(std::move(t));
    CHECK(typed.to_vector() == std::vector<float>(1000, 2.f));
    kept = detail::adopt<any_gpu>(std::move(typed));
  }
  CHECK_THROWS_AS((void)device_id(id_of<any_gpu>), device_error);
  // Freed outside any scope, into the arena it came from.
  kept = tensor<float, any_gpu>{};
  CHECK(memory_stats(id_of<gpu<1>>).live_bytes == before1);
}

TEST_CASE("a gpu<N> evaluation runs as any_gpu on gpu<N>, inside any scope, and leaves the scope as it was",
          "[device][any_gpu]") {
  tensor<float, gpu<1>> a(shape{300}, 2.f);
  const auto before0 = memory_stats(id_of<gpu<0>>).live_bytes;
  const auto check = [&] {
    std::string lines;
    tensor<float, gpu<1>> b, c(shape{300}, 1.f);
    {
      scoped_placement_log log([&](std::string_view l) { lines += std::string(l) + "\n"; });
      b = on<gpu<1>>(a * 3.f + sum(a));  // evaluate, with a staged reduction
      c = c + b;                         // assign in place
      const tensor<float, gpu<1>, 2> x(shape{1, 300}, 1.f), y(shape{300, 1}, 1.f);
      tensor<float, gpu<1>, 2> m = matmul(x, y);  // a product
      CHECK(m.to_vector() == std::vector<float>{300.f});
    }
    CHECK(b.to_vector() == std::vector<float>(300, 606.f));
    CHECK(c.to_vector() == std::vector<float>(300, 607.f));
    CHECK(lines.find("GPU:1") != std::string::npos);
    CHECK(lines.find("GPU:0") == std::string::npos);
    CHECK(memory_stats(id_of<gpu<0>>).live_bytes == before0);  // nothing allocated on the scope's GPU
  };
  check();  // outside any scope: none is left behind
  CHECK_THROWS_AS((void)device_id(id_of<any_gpu>), device_error);
  {
    const device_scope zero(id_of<gpu<0>>);
    check();  // inside gpu<0>'s scope: still gpu<1>, and gpu<0>'s scope comes back
    CHECK(device_id(id_of<any_gpu>) == id_of<gpu<0>>);
  }
}
#endif

#if LOCUS_HAS_GPUS
TEST_CASE("host_waits counts each time the host waits on a GPU: reads and complete copies, never a kernel",
          "[device][counters]") {
  const device_id g0 = id_of<gpu<0>>, g1 = id_of<gpu<1>>;
  tensor<float, gpu<0>> a(shape{1000}, 2.f);
  tensor<float, gpu<0>, 0> s;
  const auto w0 = host_waits(g0), w1 = host_waits(g1), l0 = kernel_launches(g0);
  tensor<float, gpu<0>> b = on<gpu<0>>(a * 3.f + 1.f);  // kernels, a reduction, a copy within the GPU:
  b = b * 2.f;                                           // the host goes on
  s = sum(b);
  const tensor<float, gpu<0>> c = b.clone();
  CHECK(kernel_launches(g0) >= l0 + 3);
  CHECK(host_waits(g0) == w0);

  CHECK(s.item() == 14000.f);  // a read: one wait
  CHECK(host_waits(g0) == w0 + 1);
  CHECK(c.to_vector() == std::vector<float>(1000, 14.f));
  CHECK(host_waits(g0) == w0 + 2);
  const tensor<float, gpu<1>> d = to<gpu<1>>(c);  // between two GPUs: one on each
  CHECK(host_waits(g0) == w0 + 3);
  CHECK(host_waits(g1) == w1 + 1);
  const tensor<float, gpu<1>> e{1.f, 2.f, 3.f};  // from the host: complete when it returns
  CHECK(host_waits(g1) == w1 + 2);
  const tensor<float, gpu<0>, 0> empty = sum(tensor<float, gpu<0>>(shape{0}));
  const auto w = host_waits(g0);
  CHECK(tensor<float, gpu<0>>(shape{0}).to_vector().empty());  // nothing to copy: no wait
  CHECK(host_waits(g0) == w);
  CHECK(host_waits(id_of<cpu>) == 0);  // the cpu never waits on itself
  CHECK(to<cpu>(d).to_vector().size() == 1000);
  CHECK(host_waits(id_of<cpu>) == 0);
  CHECK(host_waits(g1) == w1 + 3);
  (void)empty;
  (void)e;
}
#endif
