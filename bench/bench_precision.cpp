// Mixed precision on the host, side by side in one run: the 784-256-10 MLP (train::sequential) on
// Fashion-MNIST, AdamW 1e-3, batch 128, sync_average over two emulated GPUs, trained in float32 and
// in bfloat16 and float16 mixed precision (train::mixed<bfloat16>, train::mixed<half>: float
// masters, the passes in 16 bits; float16 with dynamic loss scaling) from the same initial weights
// and data order: the test accuracy after each epoch, the seconds per epoch and float16's skipped
// steps and final scale. On the host a bfloat16 product is a float product of widened operands (there are no
// 16-bit GEMMs in CBLAS), so the bfloat16 run does more work there: its speed is a GPU figure
// (scripts/gpu-check.sh); this table is about accuracy.
//
//   bench_precision [epochs = 5]
#include <locus/locus.hpp>
#include <locus/train/data_parallel.hpp>
#include <locus/train/mixed_precision.hpp>

#include "harness.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace locus;
namespace nn = locus::train::nn;

namespace {
struct run {
  std::vector<double> accuracy;  // after each epoch
  double seconds = 0;
  std::size_t skipped = 0;
  double scale = 0;
};

template <class M>
run train_for(const M& model, std::size_t epochs, const data::labelled_images& train_set,
              const data::labelled_images& test_set) {
  train::data_parallel<train::sync_average, gpu<0>, gpu<1>> trainer{model, train::adamw{1e-3f}};
  train::fit_options o;
  o.epochs = epochs;
  o.batch = 128;
  o.log_every = 0;
  o.bar = train::progress_bar::off;
  run r;
  o.validation = &test_set;
  o.on_epoch = [&](const train::epoch_summary& s) {
    r.accuracy.push_back(s.validation_accuracy);
    return true;
  };
  const auto result = trainer.fit(train_set, o);
  r.seconds = result.seconds;
  r.skipped = result.skipped;
  r.scale = trainer.state().loss_scale;
  return r;
}
}  // namespace

int main(int argc, char** argv) {
  const std::size_t epochs = argc > 1 ? std::size_t(std::max(1, std::atoi(argv[1]))) : 5;
  std::printf("%d host cores, 2 emulated GPUs\n", backend::host_cores());
  const auto train_set = data::fashion_mnist::load_train();
  const auto test_set = data::fashion_mnist::load_test();
  const train::sequential mlp{nn::dense(784, 256), nn::relu, nn::dense(256, 10)};
  const run f = train_for(mlp, epochs, train_set, test_set);
  const run h = train_for(train::mixed<bfloat16>(mlp), epochs, train_set, test_set);
  const run f16 = train_for(train::mixed<half>(mlp), epochs, train_set, test_set);
  locus_bench::header("test accuracy of the 784-256-10 MLP after each epoch (AdamW 1e-3, batch 128, sync_average "
                      "on 2 emulated GPUs): float32 against bfloat16 and float16 mixed precision",
                      {"epoch", "float32", "bfloat16 mixed", "bfloat16 - float32", "float16 mixed",
                       "float16 - float32"});
  for (std::size_t e = 0; e < std::min({f.accuracy.size(), h.accuracy.size(), f16.accuracy.size()}); ++e)
    std::printf("| %zu | %.4f | %.4f | %+.4f | %.4f | %+.4f |\n", e + 1, f.accuracy[e], h.accuracy[e],
                h.accuracy[e] - f.accuracy[e], f16.accuracy[e], f16.accuracy[e] - f.accuracy[e]);
  std::printf("\nfloat16: %zu step(s) skipped (gradient not finite at the scale), final loss scale %g\n", f16.skipped,
              f16.scale);
  locus_bench::header("seconds per epoch on the host (the 16-bit products widen to float: see the top of the file)",
                      {"run", "s / epoch", "this / float32"});
  std::printf("| float32 | %.2f | 1.00 |\n", f.seconds / double(epochs));
  std::printf("| bfloat16 mixed | %.2f | %.2f |\n", h.seconds / double(epochs), h.seconds / f.seconds);
  std::printf("| float16 mixed | %.2f | %.2f |\n", f16.seconds / double(epochs), f16.seconds / f.seconds);
  return 0;
}
