// A residual network written forward only: a block whose input is added to its output, with
// dropout inside it, in train::functional. The intermediate used twice is kept (ad::keep), so one
// training step computes each operation once forward and its gradient once backward: the
// placement log of one step shows it. Then both policies train it on two GPUs (emulated where
// there are none) on Fashion-MNIST.
//
//   residual [--max-steps N] [--expect-accuracy A]
#include <locus/locus.hpp>
#include <locus/train/data_parallel.hpp>
#include <locus/train/layers.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

using namespace locus;
namespace nn = locus::train::nn;

int main(int argc, char** argv) try {
  std::size_t max_steps = 200;
  double expect = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "--max-steps") max_steps = std::stoul(argv[i + 1]);
    else if (flag == "--expect-accuracy") expect = std::stod(argv[i + 1]);
    else throw std::invalid_argument("unknown option " + std::string(flag));
  }

  // ---- the model: 784 -> 128, a residual block of 128 with dropout, -> 10 logits ----
  train::functional model{
      train::parameters{nn::glorot(784, 128), nn::zeros(128), nn::glorot(128, 128), nn::zeros(128),
                        nn::glorot(128, 10), nn::zeros(10)},
      [](const auto& p, const auto& x, const train::pass& s) {
        const auto& [w1, b1, w2, b2, w3, b3] = p;
        const auto h = ad::keep(relu(matmul(x, w1) + b1));  // used twice below: computed once
        const auto r = ad::keep(nn::dropout(0.2)(relu(matmul(h, w2) + b2), s.site(0)) + h);
        return matmul(r, w3) + b3;
      }};
  // ---- that is all: gradients, dropout's masks and the loss (softmax cross-entropy) come with it ----

#if LOCUS_HAS_GPUS
  if (gpu_count() < 2) configure_logical_gpus(2);
  using D0 = gpu<0>;
  using D1 = gpu<1>;
#else
  using D0 = cpu;  // a build without GPUs: one replica
  using D1 = cpu;
#endif
  const auto train_set = data::fashion_mnist::load_train();
  const auto test_set = data::fashion_mnist::load_test();

  // One training step of a batch of 64 on the last device, with the placement log on: its kernel
  // launches and matrix products, against the same block written without ad::keep (h and r then
  // expressions, run again at each use forward and differentiated again backward).
  train::functional unkept{
      train::parameters{nn::glorot(784, 128), nn::zeros(128), nn::glorot(128, 128), nn::zeros(128),
                        nn::glorot(128, 10), nn::zeros(10)},
      [](const auto& p, const auto& x, const train::pass& s) {
        const auto& [w1, b1, w2, b2, w3, b3] = p;
        const auto h = relu(matmul(x, w1) + b1);
        const auto r = nn::dropout(0.2)(relu(matmul(h, w2) + b2), s.site(0)) + h;
        return matmul(r, w3) + b3;
      }};
  const auto one_step = [&](const auto& m, const char* what) {
    const auto p = m.template init<D1>();
    std::vector<std::uint32_t> order(64);
    for (std::uint32_t i = 0; i < 64; ++i) order[i] = i;
    auto [x, y] = data::gather<D1>(train_set, order, 0, 64);
    int products = 0;
    std::string device;
    const auto launches = kernel_launches(id_of<D1>);
    {
      const scoped_placement_log log([&](std::string_view line) {
        if (line.find("(MatMul): ") == std::string_view::npos) return;
        ++products;
        device = std::string(line.substr(line.find("): ") + 3));
      });
      (void)m.loss_and_grad(p, x, y.labels, 0);
    }
    std::printf("one training step %s on %s: %zu kernel launches, %d matrix products\n", what, device.c_str(),
                std::size_t(kernel_launches(id_of<D1>) - launches), products);
  };
  one_step(model, "with ad::keep");
  one_step(unkept, "without it");

  train::fit_options options;
  options.max_steps = max_steps;
  options.log_every = 0;
  options.bar = train::progress_bar::off;
  int status = 0;
  const auto train_with = [&]<class Policy>(const char* name) {
#if LOCUS_HAS_GPUS
    train::data_parallel<Policy, D0, D1> trainer{model, train::sgd{0.05f, 0.9f}};
#else
    train::data_parallel<Policy, D0> trainer{model, train::sgd{0.05f, 0.9f}};
#endif
    const auto r = trainer.fit(train_set, options);
    const double accuracy = trainer.accuracy(test_set);
    std::printf("%s: %zu parameters, %zu steps, test accuracy %.4f\n", name, trainer.parameter_count(), r.steps,
                accuracy);
    if (accuracy < expect) {
      std::printf("FAILED: %s: accuracy %.4f below %.4f\n", name, accuracy, expect);
      status = 1;
    }
  };
  train_with.template operator()<train::sync_average>("sync_average");
  train_with.template operator()<train::hogwild>("hogwild");
  return status;
} catch (const std::exception& e) {
  std::fprintf(stderr, "residual: %s\n", e.what());
  return 1;
}
