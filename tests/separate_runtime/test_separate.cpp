// LOCUS_SEPARATE_RUNTIME=1: the run-time part (registry, arenas, placement log, error messages) is
// compiled once, in runtime.cpp; this file and other.cpp compile calls into it. One registry, one
// log and the same messages as a header-only build, whichever translation unit asks.
#include "catch.hpp"
#include "other.hpp"

#include <locus/locus.hpp>

#include <limits>
#include <string>
#include <string_view>
#include <vector>

using namespace locus;

static_assert(LOCUS_RUNTIME_DEFINITIONS == 0, "this translation unit must not define the run-time part");

TEST_CASE("separate runtime: one registry for every translation unit") {
  REQUIRE(gpu_count() == 2);  // LOCUS_EMULATED_GPUS=2 (the test's environment)
  CHECK(other::gpus_seen() == 2);
  configure_logical_gpus(3);
  CHECK(other::gpus_seen() == 3);
  CHECK(available_devices().size() == 4);
  configure_logical_gpus(2);
  CHECK(other::gpus_seen() == 2);
  CHECK_THROWS_WITH(configure_logical_gpus(0), "locus: configure_logical_gpus(0): need 1 to 4096 logical GPUs");
}

TEST_CASE("separate runtime: tensors made in one translation unit, evaluated and freed in another") {
  const auto before = memory_stats(id_of<gpu<1>>);
  const std::size_t launches = other::launches_on_gpu1();
  {
    const tensor<float, gpu<1>> x{1.f, 2.f, 3.f};
    const auto y = other::doubled_on_gpu1(x);
    CHECK(kernel_launches(id_of<gpu<1>>) == launches + 1);
    CHECK(y.to_vector() == std::vector<float>{2.f, 4.f, 6.f});
    CHECK(memory_stats(id_of<gpu<1>>).live_blocks == before.live_blocks + 2);
  }
  CHECK(memory_stats(id_of<gpu<1>>).live_blocks == before.live_blocks);
}

TEST_CASE("separate runtime: the placement log sees both translation units") {
  std::vector<std::string> lines;
  {
    scoped_placement_log log{[&](std::string_view l) { lines.emplace_back(l); }};
    const tensor<float, gpu<1>> x{1.f, 2.f};
    (void)other::doubled_on_gpu1(x);
    (void)to<cpu>(x);
  }
  const auto has = [&](std::string_view needle) {
    for (const auto& l : lines)
      if (l.find(needle) != std::string::npos) return true;
    return false;
  };
  CHECK(has("mul: (Mul): /job:localhost/replica:0/task:0/device:GPU:1 (emulated)"));
  CHECK(has("transfer: (Copy): /job:localhost/replica:0/task:0/device:GPU:1 -> "
            "/job:localhost/replica:0/task:0/device:CPU:0, 8 bytes"));
}

TEST_CASE("separate runtime: errors carry the same messages") {
  CHECK_THROWS_WITH(other::mismatched_sum(), "locus: add: operand shapes [3] and [2] do not match");
  const tensor<float, cpu, 2> a(shape{2, 3}, 1.f), b(shape{4, 2}, 1.f);
  CHECK_THROWS_WITH(on<cpu>(matmul(a, b)), "locus: matmul: the inner extents differ: [2, 3] x [4, 2]");
  tensor<float, cpu> c(shape{4}, 0.f);
  const tensor<float, cpu> d{1.f, 2.f};
  CHECK_THROWS_WITH(c = d * 2.f, "locus: assignment: the destination has shape [4], the expression [2]");
  CHECK_THROWS_WITH((tensor<float, gpu<7>>{1.f}), Catch::Contains("gpu<7>) is not available in this process"));
  CHECK_THROWS_AS((tensor<float, cpu>(shape{std::size_t{1} << 61}, 0.f)), allocation_error);
  const std::vector<float> five(5);
  CHECK_THROWS_WITH((tensor<float, gpu<0>, 2>(shape{2, 3}, five)),
                    "locus: tensor of shape [2, 3] needs 6 elements, the host range has 5");
  const std::size_t huge = std::numeric_limits<std::size_t>::max() / 2;
  CHECK_THROWS_WITH((tensor<float, gpu<1>, 2>(shape{huge, std::size_t{4}})),
                    "locus: cannot allocate " + std::to_string(std::numeric_limits<std::size_t>::max()) +
                        " bytes on /job:localhost/replica:0/task:0/device:GPU:1: the extents [" + std::to_string(huge) +
                        ", 4] overflow size_t");
}
