// Data sets from the program's own arrays (data/dataset.hpp): what make_dataset keeps and refuses,
// what split chooses, and a trainer fed from both.
#include "../common/test_support.hpp"
#include "../common/train_support.hpp"

#include <locus/data/dataset.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

using namespace locus;
using locus_test::error_of;

TEST_CASE("make_dataset keeps rows of features and their labels, from vectors or tensors", "[data][dataset]") {
  const std::vector<float> x{0.f, 1.f, 2.f, 3.f, 4.f, 5.f};
  const std::vector<std::int32_t> y{2, 0, 1};
  const auto d = data::make_dataset(x, 2, y, 3);
  CHECK(d.size() == 3);
  CHECK(d.images.shape() == shape{3, 2});
  CHECK(d.images.to_vector() == x);
  CHECK(d.labels.to_vector() == y);
  const auto t = data::make_dataset(tensor<float, cpu, 2>(shape{3, 2}, x), tensor<std::int32_t, cpu>(y));
  CHECK(t.images.to_vector() == x);
  CHECK(t.labels.to_vector() == y);
  // One row of one feature, and label values up to INT32_MAX when no class count is given.
  const auto one = data::make_dataset(std::vector<float>{-1e30f}, 1, std::vector<std::int32_t>{INT32_MAX});
  CHECK(one.labels.to_vector() == std::vector<std::int32_t>{INT32_MAX});
}

TEST_CASE("make_dataset refuses bad arrays and names what is wrong", "[data][dataset][adversary]") {
  const std::vector<float> x{0.f, 1.f, 2.f, 3.f, 4.f, 5.f};
  const std::vector<std::int32_t> y{2, 0, 1};
  const auto message = [](auto&& f) { return error_of(f); };
  CHECK(message([&] { (void)data::make_dataset(x, 0, y); }).find("a row size of 0") != std::string::npos);
  CHECK(message([&] { (void)data::make_dataset(x, 4, y); }).find("6 features are not a whole number of rows of 4") !=
        std::string::npos);
  CHECK(message([&] { (void)data::make_dataset(x, 3, y); }).find("2 rows of 3 features but 3 labels") !=
        std::string::npos);
  CHECK(message([&] { (void)data::make_dataset(std::vector<float>{}, 2, std::vector<std::int32_t>{}); }).find("no rows") != std::string::npos);
  CHECK(message([&] { (void)data::make_dataset(std::vector<float>{}, 2, y); }).find("0 rows of 2 features but 3 labels") !=
        std::string::npos);
  auto bad = x;
  bad[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK(message([&] { (void)data::make_dataset(bad, 2, y); }).find("feature 1 of row 1 is NaN") != std::string::npos);
  bad[3] = -std::numeric_limits<float>::infinity();
  CHECK(message([&] { (void)data::make_dataset(bad, 2, y); }).find("feature 1 of row 1 is infinite") !=
        std::string::npos);
  CHECK(message([&] { (void)data::make_dataset(x, 2, std::vector<std::int32_t>{0, -1, 0}); })
            .find("label -1 of row 1 is negative") != std::string::npos);
  CHECK(message([&] { (void)data::make_dataset(x, 2, std::vector<std::int32_t>{0, 1, 3}, 3); })
            .find("label 3 of row 2 is outside [0, 3)") != std::string::npos);
  CHECK(message([&] {
          (void)data::make_dataset(tensor<float, cpu, 2>(shape{2, 3}, 1.f), tensor<std::int32_t, cpu>(y));
        }).find("2 rows of features but 3 labels") != std::string::npos);
  CHECK_THROWS_AS(data::make_dataset(x, 4, y), data::data_error);
}

TEST_CASE("split: a seeded choice, the same everywhere, each part in the dataset's order", "[data][dataset]") {
  const std::size_t n = 50;
  std::vector<float> x(n * 2);
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[2 * i] = float(i);
    x[2 * i + 1] = -float(i);
    y[i] = std::int32_t(i % 7);
  }
  const auto d = data::make_dataset(x, 2, y);
  const auto [train, val] = data::split(d, 0.2, 42);
  REQUIRE(val.size() == 10);  // round(0.2 x 50)
  REQUIRE(train.size() == 40);
  const auto rows_of = [](const data::dataset& part) {
    std::vector<std::size_t> r;
    const auto v = part.images.to_vector();
    const auto l = part.labels.to_vector();
    for (std::size_t i = 0; i < part.size(); ++i) {
      const auto row = std::size_t(v[2 * i]);
      CHECK(v[2 * i + 1] == -v[2 * i]);         // rows whole
      CHECK(l[i] == std::int32_t(row % 7));  // each with its own label
      r.push_back(row);
    }
    return r;
  };
  const auto tr = rows_of(train), va = rows_of(val);
  CHECK(std::is_sorted(tr.begin(), tr.end()));
  CHECK(std::is_sorted(va.begin(), va.end()));
  std::set<std::size_t> all(tr.begin(), tr.end());
  all.insert(va.begin(), va.end());
  CHECK(all.size() == n);  // every row once
  // splitmix64 and a Fisher-Yates of its own: this seed picks these rows on every platform (the
  // same as a 10-line Python transcription of the two).
  CHECK(va == std::vector<std::size_t>{3, 5, 13, 20, 21, 22, 35, 36, 47, 48});
  CHECK(rows_of(data::split(d, 0.2, 42).validation) == va);  // the same seed, the same parts
  CHECK(rows_of(data::split(d, 0.2, 43).validation) != va);
  // The smallest and largest fractions that leave a row on each side.
  CHECK(data::split(d, 0.01, 1).validation.size() == 1);
  CHECK(data::split(d, 0.98, 1).train.size() == 1);
}

TEST_CASE("split refuses fractions outside (0, 1) and parts left empty", "[data][dataset][adversary]") {
  const auto d = data::make_dataset(std::vector<float>{1.f, 2.f, 3.f, 4.f}, 1, std::vector<std::int32_t>{0, 1, 0, 1});
  for (double f : {0.0, 1.0, -0.5, 2.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()})
    CHECK(error_of([&] { (void)data::split(d, f, 1); }).find("must lie in (0, 1)") != std::string::npos);
  CHECK(error_of([&] { (void)data::split(d, 0.1, 1); }).find("leaves the validation part empty") != std::string::npos);
  CHECK(error_of([&] { (void)data::split(d, 1e-300, 1); }) ==
        "locus: split: a validation fraction of 1e-300 of 4 rows leaves the validation part empty");
  CHECK(error_of([&] { (void)data::split(d, 0.999999999, 1); }).find("of 0.999999999 of 4 rows") != std::string::npos);
  CHECK(error_of([&] { (void)data::split(d, 0.9, 1); }).find("leaves the training part empty") != std::string::npos);
  CHECK_THROWS_AS(data::split(d, 0.0, 1), config_error);
  // A dataset assembled by hand whose parts disagree: named, not read past its end.
  data::dataset broken{tensor<float, cpu, 2>(shape{4, 1}, 1.f), tensor<std::int32_t, cpu>(shape{3}, 0)};
  CHECK(error_of([&] { (void)data::split(broken, 0.5, 1); }).find("4 rows of features but 3 labels") !=
        std::string::npos);
}

TEST_CASE("a trainer learns from the program's own arrays and is measured on a split-off part",
          "[data][dataset][train]") {
  // The class is the index of the largest of the first 4 of 16 features (train_support's rule),
  // from host vectors this time.
  const auto made = locus_test::synthetic(600, 11);
  const auto x = made.images.to_vector();
  const auto y = made.labels.to_vector();
  const auto all = data::make_dataset(x, 16, y, 4);
  const auto [train, val] = data::split(all, 0.25, 5);
  train::data_parallel<train::sync_average, cpu> trainer(train::softmax_regression<float>(16, 4), train::sgd{0.5f});
  const double before = trainer.accuracy(val);
  (void)trainer.fit(train, locus_test::quiet(20, 30));
  CHECK(trainer.accuracy(val) > 0.8);
  CHECK(trainer.accuracy(val) > before + 0.3);
}

TEST_CASE("make_dataset keeps rows of float targets, from vectors or tensors, and split carries them",
          "[data][dataset]") {
  const std::vector<float> x{0.f, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f};
  const std::vector<float> t{0.5f, -1.f, 1.5f, -2.f, 2.5f, -3.f, 3.5f, -4.f};
  const auto d = data::make_dataset(x, 2, t, 2);
  CHECK(d.size() == 4);
  CHECK(d.has_targets());
  CHECK(d.labels.size() == 0);
  CHECK(d.targets.shape() == shape{4, 2});
  CHECK(d.targets.to_vector() == t);
  const auto e = data::make_dataset(tensor<float, cpu, 2>(shape{4, 2}, x), tensor<float, cpu, 2>(shape{4, 2}, t));
  CHECK(e.images.to_vector() == x);
  CHECK(e.targets.to_vector() == t);
  // Each row's targets go with its features: feature 0 of row r is 2r, its targets r + 0.5 and -(r + 1).
  const auto [train, val] = data::split(d, 0.5, 3);
  CHECK(train.size() == 2);
  CHECK(val.size() == 2);
  for (const auto* part : {&train, &val}) {
    CHECK(part->labels.size() == 0);
    REQUIRE(part->targets.shape() == shape{2, 2});
    for (std::size_t r = 0; r < 2; ++r) {
      const float row = part->images(r, std::size_t(0)) / 2.f;
      CHECK(part->targets(r, std::size_t(0)) == row + 0.5f);
      CHECK(part->targets(r, std::size_t(1)) == -(row + 1.f));
    }
  }
  // The gather of a batch carries the rows' targets and no labels.
  const std::vector<std::uint32_t> order{3, 1};
  auto [bx, by] = data::gather<cpu>(d, order, 0, 2);
  CHECK(by.labels.size() == 0);
  CHECK(by.values.to_vector() == std::vector<float>{3.5f, -4.f, 1.5f, -2.f});
  CHECK(bx.to_vector() == std::vector<float>{6.f, 7.f, 2.f, 3.f});
}

TEST_CASE("make_dataset of float targets refuses bad arrays and names what is wrong", "[data][dataset][adversary]") {
  const std::vector<float> x{0.f, 1.f, 2.f, 3.f, 4.f, 5.f};
  const std::vector<float> t{1.f, 2.f, 3.f};
  const auto message = [](auto&& f) { return error_of(f); };
  CHECK(message([&] { (void)data::make_dataset(x, 2, t, 0); }).find("a target size of 0") != std::string::npos);
  CHECK(message([&] { (void)data::make_dataset(x, 0, t, 1); }).find("a row size of 0") != std::string::npos);
  CHECK(message([&] { (void)data::make_dataset(std::vector<float>{}, 2, std::vector<float>{}, 1); }).find("no rows") !=
        std::string::npos);
  CHECK(message([&] { (void)data::make_dataset(x, 2, t, 2); }).find("3 targets are not a whole number of rows of 2") !=
        std::string::npos);
  CHECK(message([&] { (void)data::make_dataset(x, 3, t, 1); }).find("2 rows of 3 features but 3 rows of 1 targets") !=
        std::string::npos);
  auto bad = t;
  bad[2] = std::numeric_limits<float>::infinity();
  CHECK(message([&] { (void)data::make_dataset(x, 2, bad, 1); }).find("target 0 of row 2 is infinite") !=
        std::string::npos);
  bad[2] = std::numeric_limits<float>::quiet_NaN();
  CHECK(message([&] { (void)data::make_dataset(x, 2, bad, 1); }).find("target 0 of row 2 is NaN") != std::string::npos);
  CHECK(message([&] {
          (void)data::make_dataset(tensor<float, cpu, 2>(shape{2, 3}, 1.f), tensor<float, cpu, 2>(shape{3, 1}, 1.f));
        }).find("2 rows of features but 3 rows of targets") != std::string::npos);
  CHECK_THROWS_AS(data::make_dataset(x, 2, bad, 1), data::data_error);
  // A hand-made data set of features alone cannot be split.
  const data::dataset none{tensor<float, cpu, 2>(shape{4, 2}, 1.f), {}, {}};
  CHECK(message([&] { (void)data::split(none, 0.5, 1); }).find("neither labels nor targets") != std::string::npos);
}
