// LOCUS_SEPARATE_RUNTIME=1: the run-time part (registry, arenas, placement log, error messages, data
// and checkpoint files, the trainer's checks and threads) is compiled once, in the file
// locus_separate_runtime adds; this file and other.cpp compile calls into it. One registry, one log
// and the same messages as a header-only build, whichever translation unit asks.
#include "catch.hpp"
#include "other.hpp"
#include "train_support.hpp"

#include <locus/data/idx.hpp>
#include <locus/locus.hpp>
#include <locus/train/data_parallel.hpp>
#include <locus/train/mlp.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
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

namespace {
/// A raw IDX file of unsigned bytes: `dims`, then `data`.
std::string write_idx(const std::string& name, const std::vector<std::uint32_t>& dims,
                      const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> b{0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
  for (auto d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(d >> s));
  b.insert(b.end(), data.begin(), data.end());
  const auto path = (std::filesystem::temp_directory_path() / ("locus_separate_" + name)).string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  std::fwrite(b.data(), 1, b.size(), f);
  std::fclose(f);
  return path;
}
}  // namespace

TEST_CASE("separate runtime: data files, training and checkpoints") {
  // 8 images of 2 x 2 pixels, labels 0..3: read by the runtime's IDX reader.
  std::vector<std::uint8_t> pixels(32), labels(8);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 8);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::uint8_t>(i % 4);
  const auto images_path = write_idx("images", {8, 2, 2}, pixels);
  const auto labels_path = write_idx("labels", {8}, labels);
  const auto data = data::read_labelled(images_path, labels_path, 4);
  REQUIRE(data.size() == 8);
  CHECK(data.images.extent(1) == 4);
  CHECK(data.images(1, 2) == float(6 * 8) / 255.f);
  labels[3] = 9;
  const auto bad_labels = write_idx("bad_labels", {8}, labels);
  CHECK(locus_test::error_of([&] { (void)data::read_labelled(images_path, bad_labels, 4); }) ==
        "locus: " + bad_labels + ": label 9 at offset 11 (example 3) is outside [0, 4)");

  // Two replicas, sync_average: the runtime's runner, reporter and checks.
  train::data_parallel<train::sync_average, gpu<0>, gpu<1>> trainer{train::mlp<float>({4, 3, 4}, 1),
                                                                     train::sgd{0.1f}};
  std::vector<std::string> lines;
  train::fit_options o;
  o.batch = 4;
  o.log_every = 1;
  o.bar = train::progress_bar::off;
  o.print = [&](const std::string& l) { lines.push_back(l); };
  const auto result = trainer.fit(data, o);
  CHECK(result.curve.size() == 2);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].rfind("step 1, loss = ", 0) == 0);
  CHECK(lines[1].find("sec/batch; 2 devices)") != std::string::npos);
  const auto mislabelled = data::read_labelled(images_path, bad_labels);  // no class check while reading
  CHECK(locus_test::error_of([&] { (void)trainer.fit(mislabelled, o); }) ==
        "locus: fit: label 3 is 9, outside the model's classes [0, 4)");

  // Saved here, read in the other translation unit; refused by a trainer of another model.
  const auto path = (std::filesystem::temp_directory_path() / "locus_separate.ckpt").string();
  trainer.save(path);
  CHECK(other::checkpoint_parameters(path) == trainer.state().parameters.size());
  train::data_parallel<train::sync_average, gpu<0>> wider{train::mlp<float>({4, 5, 4}, 1), train::sgd{0.1f}};
  CHECK(locus_test::error_of([&] { wider.load(path); }) ==
        "locus: checkpoint " + path + ": its tensors [[4, 3], [3], [3, 4], [4]] do not match the model's "
        "[[4, 5], [5], [5, 4], [4]]");
  CHECK(locus_test::error_of([&] { wider.load(path + ".missing"); }) ==
        "locus: checkpoint " + path + ".missing: cannot open the file: No such file or directory");
  for (const auto& f : {images_path, labels_path, bad_labels, path}) std::filesystem::remove(f);
}
