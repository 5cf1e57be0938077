#include "../common/test_support.hpp"

#include <locus/dist/in_process.hpp>
#include <locus/dist/mpi.hpp>
#include <locus/dist/nccl.hpp>

#include <limits>
#include <string>
#include <vector>

using namespace locus;

namespace {
template <device D>
tensor<float, D, 1> filled(std::vector<float> v) {
  return to<D>(tensor<float, cpu, 1>(v));
}
}  // namespace

TEST_CASE("the communicator kinds meet the concept", "[dist]") {
  STATIC_REQUIRE(dist::communicator_kind<dist::in_process>);
  STATIC_REQUIRE(dist::communicator_kind<dist::mpi>);
  STATIC_REQUIRE(dist::communicator_kind<dist::nccl>);
  STATIC_REQUIRE(dist::communicator_kind<dist::automatic>);
  STATIC_REQUIRE(dist::communicator<dist::in_process::group<cpu>, cpu>);
  STATIC_REQUIRE(dist::communicator<dist::automatic::group<cpu>, cpu>);
  STATIC_REQUIRE_FALSE(dist::communicator_kind<int>);
  STATIC_REQUIRE_FALSE(dist::one_sided<dist::in_process::group<cpu>>);
#if LOCUS_HAS_MPI
  STATIC_REQUIRE(dist::communicator<dist::mpi::group<cpu>, cpu>);
  STATIC_REQUIRE(dist::one_sided<dist::mpi::group<cpu>>);
#endif
}

TEST_CASE("in_process: one device's all-reduce leaves its buffer as it was", "[dist]") {
  dist::in_process::group<cpu> g;
  auto a = filled<cpu>({1.f, -2.f, 3.5f});
  g.all_reduce_sum(dist::buffers<cpu>{a.view()});
  CHECK(a.to_vector() == std::vector<float>{1.f, -2.f, 3.5f});
  CHECK(g.rank() == 0);
  CHECK(g.size() == 1);
  CHECK(g.first_failure("boom") == "boom");
}

#if LOCUS_HAS_GPUS
TEST_CASE("in_process: all-reduce and broadcast over cpu and two GPUs", "[dist][gpu]") {
  dist::automatic::group<cpu, gpu<0>, gpu<1>> g;
  CHECK(g.name() == "in_process");  // NCCL serves GPUs only
  auto a = filled<cpu>({1.f, 2.f, 3.f, 0.f});
  auto b = filled<gpu<0>>({10.f, 20.f, 30.f, -1.f});
  auto c = filled<gpu<1>>({100.f, 200.f, 300.f, 1e30f});
  g.all_reduce_sum({a.view(), b.view(), c.view()});
  const std::vector<float> sum{111.f, 222.f, 333.f, 1e30f};  // 0 - 1 + 1e30 rounds to 1e30
  CHECK(a.to_vector() == sum);
  CHECK(b.to_vector() == sum);
  CHECK(c.to_vector() == sum);
  // Non-finite values travel as they are (the policies look for them after the exchange).
  auto d = filled<cpu>({1.f, 5.f, 9.f, 0.f});
  b = b * std::numeric_limits<float>::quiet_NaN();
  g.broadcast({d.view(), b.view(), c.view()});
  CHECK(b.to_vector() == d.to_vector());
  CHECK(c.to_vector() == d.to_vector());
  // Empty buffers are fine.
  tensor<float, cpu, 1> e0(shape{std::size_t(0)});
  tensor<float, gpu<0>, 1> e1(shape{std::size_t(0)});
  tensor<float, gpu<1>, 1> e2(shape{std::size_t(0)});
  g.all_reduce_sum({e0.view(), e1.view(), e2.view()});
  CHECK(e0.size() == 0);
}

TEST_CASE("automatic: NCCL only where every replica is a GPU of its own and NCCL is linked", "[dist][gpu]") {
  // Emulated GPUs and logical GPUs on one card never use NCCL.
  dist::automatic::group<gpu<0>, gpu<1>> g;
  const bool own_cards = LOCUS_HAS_NCCL && gpu_count() >= 2 && backend::registry::instance().physical_gpus() >= 2;
  CHECK(g.uses_nccl() == own_cards);
  CHECK(g.name() == (own_cards ? "nccl" : "in_process"));
  CHECK(dist::nccl::usable<gpu<0>, gpu<1>>() == own_cards);
  CHECK_FALSE(dist::nccl::usable<cpu, gpu<0>>());
}
#endif

#if LOCUS_HAS_NCCL
TEST_CASE("nccl: all-reduce and broadcast on the GPUs, or a config_error naming logical GPUs on one card",
          "[dist][gpu][nccl]") {
  if (backend::registry::instance().physical_gpus() < 2) {
    CHECK_THROWS_WITH((dist::nccl::group<gpu<0>, gpu<1>>{}),
                      Catch::Contains("are both on CUDA device 0 (logical GPUs), and NCCL needs a GPU per replica"));
    // One replica: NCCL runs (a communicator of one rank).
    dist::nccl::group<gpu<0>> one;
    auto a = filled<gpu<0>>({1.f, 2.f, 3.f});
    one.all_reduce_sum({a.view()});
    CHECK(a.to_vector() == std::vector<float>{1.f, 2.f, 3.f});
    return;
  }
  dist::nccl::group<gpu<0>, gpu<1>> g;
  auto a = filled<gpu<0>>({1.f, 2.f, 3.f});
  auto b = filled<gpu<1>>({10.f, 20.f, 30.f});
  g.all_reduce_sum({a.view(), b.view()});
  CHECK(a.to_vector() == std::vector<float>{11.f, 22.f, 33.f});
  CHECK(b.to_vector() == std::vector<float>{11.f, 22.f, 33.f});
  auto c = filled<gpu<0>>({7.f, 8.f, 9.f});
  g.broadcast({c.view(), b.view()});
  CHECK(b.to_vector() == std::vector<float>{7.f, 8.f, 9.f});
}
#endif
