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
