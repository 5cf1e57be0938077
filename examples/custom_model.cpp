// A model of your own, written forward only: locus::ad differentiates it, and data_parallel trains
// it on two GPUs (emulated where there are none) with both policies, synchronous averaging and
// Hogwild, on Fashion-MNIST.
//
//   custom_model [--epochs E] [--max-steps N] [--policy sync|hogwild|both] [--expect-accuracy A]
//                [--layers]   (--layers: the README's train::sequential 784-128-64-10 instead)
#include <locus/locus.hpp>
#include <locus/train/data_parallel.hpp>
#include <locus/train/layers.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

using namespace locus;
namespace nn = locus::train::nn;

int main(int argc, char** argv) try {
  std::size_t max_steps = 0, epochs = 1;
  double expect = 0;
  std::string policy = "both";
  bool layers = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--layers") {
      layers = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument("option " + std::string(flag) + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--max-steps") max_steps = std::stoul(value);
    else if (flag == "--epochs") epochs = std::stoul(value);
    else if (flag == "--expect-accuracy") expect = std::stod(value);
    else if (flag == "--policy" && (value == "sync" || value == "hogwild" || value == "both")) policy = value;
    else throw std::invalid_argument("unknown option " + std::string(flag) + " " + value);
  }

  // ---- the model: its parameters' initial values and its forward pass; no gradients ----
  train::functional model{
      train::parameters{nn::glorot(784, 128), nn::zeros(128), nn::glorot(128, 64), nn::zeros(64),
                        nn::glorot(64, 10), nn::zeros(10)},
      [](const auto& p, const auto& x) {
        const auto& [w1, b1, w2, b2, w3, b3] = p;
        auto h1 = relu(matmul(x, w1) + b1);
        auto h2 = tanh(matmul(h1, w2) + b2);
        return matmul(h2, w3) + b3;  // the logits; the loss is their softmax cross-entropy
      }};
  // ---- (a stack of layers is one line: train::sequential{nn::dense(784, 128), nn::relu, ...}) ----

  const auto train_set = data::fashion_mnist::load_train();
  const auto test_set = data::fashion_mnist::load_test();
#if LOCUS_HAS_GPUS
  if (gpu_count() < 2) configure_logical_gpus(2);
  using D0 = gpu<0>;
  using D1 = gpu<1>;
#else
  using D0 = cpu;  // a build without GPUs: one replica
  using D1 = cpu;
#endif
  train::fit_options options;
  options.epochs = epochs;
  options.max_steps = max_steps;
  options.log_every = 0;
  options.bar = train::progress_bar::off;
  int status = 0;
  auto train_with = [&]<class Policy>(const char* name, const auto& m) {
#if LOCUS_HAS_GPUS
    train::data_parallel<Policy, D0, D1> trainer{m, train::sgd{}};
#else
    train::data_parallel<Policy, D0> trainer{m, train::sgd{}};
#endif
    const auto r = trainer.fit(train_set, options);
    const double accuracy = trainer.accuracy(test_set);
    std::printf("%s on %s and %s: %zu parameters, %zu steps, test accuracy %.4f\n", name, id_of<D0>.full_name().c_str(),
                id_of<D1>.full_name().c_str(), trainer.parameter_count(), r.steps, accuracy);
    if (accuracy < expect) {
      std::printf("FAILED: %s: accuracy %.4f below %.4f\n", name, accuracy, expect);
      status = 1;
    }
  };
  auto run = [&](const auto& m) {
    if (policy != "hogwild") train_with.template operator()<train::sync_average>("sync_average", m);
    if (policy != "sync") train_with.template operator()<train::hogwild>("hogwild", m);
  };
  if (layers) run(train::sequential{nn::dense(784, 128), nn::relu, nn::dense(128, 64), nn::relu, nn::dense(64, 10)});
  else run(model);
  return status;
} catch (const std::exception& e) {
  std::fprintf(stderr, "custom_model: %s\n", e.what());
  return 1;
}
