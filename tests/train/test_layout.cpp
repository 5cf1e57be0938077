// The flat parameter layout (train/layout.hpp) and the batch sampler (data/sampler.hpp).
#include "../common/test_support.hpp"
#include "../common/train_support.hpp"

#include <locus/data/sampler.hpp>
#include <locus/train/layout.hpp>

#include <algorithm>
#include <vector>

using namespace locus;
using namespace locus::train;
using namespace locus_test;

TEST_CASE("pack, unpack and segments walk the tensors in order", "[train][layout]") {
  tensor<float, cpu, 1> a{1.f, 2.f, 3.f}, b{4.f}, c(shape{std::size_t(0)});
  tensor<float, cpu, 1> d{5.f, 6.f};
  const std::vector<tensor_view<float, cpu, 1>> views{a.view(), b.view(), c.view(), d.view()};
  CHECK(flat_size(views) == 6);
  const auto host = to_host(views);
  CHECK(host == std::vector<float>{1.f, 2.f, 3.f, 4.f, 5.f, 6.f});
  std::vector<float> other{10.f, 20.f, 30.f, 40.f, 50.f, 60.f};
  from_host(other, views);
  CHECK(a.to_vector() == std::vector<float>{10.f, 20.f, 30.f});
  CHECK(d.to_vector() == std::vector<float>{50.f, 60.f});
  const auto parts = segments<float, cpu>(other.data(), views);
  REQUIRE(parts.size() == 4);
  CHECK(parts[1].data() == other.data() + 3);
  CHECK(parts[2].size() == 0);
  CHECK(parts[3].data() == other.data() + 4);
  // A buffer too small for the tensors is refused before anything is copied.
  std::vector<float> small{7.f, 7.f};
  CHECK_THROWS_WITH(from_host(small, views), "locus: unpack: a flat buffer of 2 elements for 6");
  CHECK(a.to_vector() == std::vector<float>{10.f, 20.f, 30.f});
  CHECK_THROWS_WITH(pack(views, tensor_view<float, cpu, 1>(small.data(), shape{small.size()})),
                    "locus: pack: a flat buffer of 2 elements for 6");
  CHECK(small == std::vector<float>{7.f, 7.f});
}

#if LOCUS_HAS_GPUS
TEST_CASE("pack and unpack across devices", "[train][layout][gpu]") {
  auto a = to<gpu<0>>(tensor<float, cpu, 1>{1.f, 2.f});
  auto b = to<gpu<0>>(tensor<float, cpu, 1>{3.f});
  const std::vector<tensor_view<float, gpu<0>, 1>> views{a.view(), b.view()};
  tensor<float, gpu<1>, 1> flat(shape{std::size_t(3)}, 0.f);
  pack(views, flat.view());
  CHECK(flat.to_vector() == std::vector<float>{1.f, 2.f, 3.f});
  flat = flat * 2.f;
  unpack(flat.view(), views);
  CHECK(a.to_vector() == std::vector<float>{2.f, 4.f});
  CHECK(b.to_vector() == std::vector<float>{6.f});
}
#endif

TEST_CASE("the sampler: a seeded permutation per epoch, equal shards, gathered rows", "[train][data]") {
  const auto e0 = data::shuffled(1000, 7, 0), again = data::shuffled(1000, 7, 0), e1 = data::shuffled(1000, 7, 1);
  CHECK(e0 == again);
  CHECK(e0 != e1);
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (std::uint32_t i = 0; i < 1000; ++i) REQUIRE(sorted[i] == i);
  CHECK(data::shuffled(0, 1, 0).empty());
  const auto s = data::shard_of(512, 256, 3, 4);
  CHECK(s.first == 512 + 3 * 64);
  CHECK(s.count == 64);
  auto set = synthetic(64, 3);
  const auto order = data::shuffled(64, 2, 0);
  auto [x, y] = data::gather<cpu>(set, order, 10, 5);
  REQUIRE(x.extent(0) == 5);
  for (std::size_t r = 0; r < 5; ++r) {
    CHECK(y.labels(r) == set.labels(order[10 + r]));
    CHECK(x(r, std::size_t(3)) == set.images(order[10 + r], std::size_t(3)));
  }
}
