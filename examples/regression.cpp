// A regression on the program's own arrays: rows of 4 features and 2 float targets made here,
// split into a training and a validation part, a small network written forward only with mean
// squared error as its loss, trained on two GPUs (emulated where there are none) by synchronous
// averaging, and measured on the validation part.
//
//   regression [--epochs E] [--expect-mse M]   (fails when the validation MSE is above M)
#include <locus/locus.hpp>
#include <locus/train/data_parallel.hpp>
#include <locus/train/layers.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

using namespace locus;
namespace nn = locus::train::nn;

int main(int argc, char** argv) try {
  std::size_t epochs = 20;
  double expect = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "--epochs") epochs = std::stoul(argv[i + 1]);
    else if (flag == "--expect-mse") expect = std::stod(argv[i + 1]);
    else throw std::invalid_argument("unknown option " + std::string(flag));
  }

  // ---- the data: any arrays of the program's, row after row ----
  const std::size_t rows = 4000;
  std::vector<float> x(rows * 4), t(rows * 2);
  std::uint64_t state = 12345;
  const auto uniform = [&] {  // in [-2, 2)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return float(state >> 40) / float(1 << 24) * 4.f - 2.f;
  };
  for (std::size_t r = 0; r < rows; ++r) {
    float* f = &x[r * 4];
    for (int j = 0; j < 4; ++j) f[j] = uniform();
    t[r * 2] = std::sin(f[0]) + 0.5f * f[1] * f[2];
    t[r * 2 + 1] = 0.25f * f[3] * f[3] - 0.5f * f[0];
  }
  const auto all = data::make_dataset(x, 4, t, 2);
  const auto [train_set, val] = data::split(all, 0.2, /*seed*/ 7);

  // ---- the model: parameters, forward pass, loss of float targets; no gradients ----
  train::functional model{train::parameters{nn::glorot(4, 64), nn::zeros(64), nn::glorot(64, 2), nn::zeros(2)},
                          [](const auto& p, const auto& xs) {
                            const auto& [w1, b1, w2, b2] = p;
                            return matmul(tanh(matmul(xs, w1) + b1), w2) + b2;
                          },
                          train::losses::mean_squared_error};

#if LOCUS_HAS_GPUS
  if (gpu_count() < 2) configure_logical_gpus(2);
  train::data_parallel<train::sync_average, gpu<0>, gpu<1>> trainer{model, train::adam{3e-3f}};
#else
  train::data_parallel<train::sync_average, cpu> trainer{model, train::adam{3e-3f}};  // a build without GPUs
#endif
  std::printf("%zu rows: %zu to train, %zu to validate; %zu parameters on %zu devices\n", all.size(), train_set.size(),
              val.size(), trainer.parameter_count(), trainer.device_count);
  const double before = trainer.mean_loss(val);
  train::fit_options options;
  options.epochs = epochs;
  options.batch = 64;
  options.log_every = 0;
  options.bar = train::progress_bar::off;
  const auto r = trainer.fit(train_set, options);
  const double after = trainer.mean_loss(val);
  std::printf("validation MSE %.4f before, %.4f after %zu steps\n", before, after, r.steps);
  if (expect > 0 && !(after <= expect)) {
    std::printf("FAILED: validation MSE %.4f above %.4f\n", after, expect);
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "regression: %s\n", e.what());
  return 1;
}
