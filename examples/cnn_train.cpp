// A convolutional network on Fashion-MNIST, trained data-parallel on one or two GPUs (emulated where
// there are none) with synchronous averaging or Hogwild, AdamW, batch 128:
//
//   reshape [1, 28, 28] -> conv2d 3x3 (padding 1) -> relu -> max_pool2d 2 -> conv2d 3x3 (padding 1)
//   -> relu -> max_pool2d 2 -> flatten -> dense 128 -> relu -> dense 10
//
// (the network of ../shared/reference/cnn_torch.py, PyTorch's side of the comparison)
//
//   cnn_train [--policy sync|hogwild] [--devices 1|2] [--epochs E] [--max-steps N]
//             [--channels C1,C2] [--test-images N] [--expect-accuracy A] [--log-device-placement]
//
// --channels picks the convolutions' widths (32,64 by default, the recipe of the README's table);
// --test-images scores the first N test images only (0: all 10000).
#include <locus/locus.hpp>
#include <locus/train/data_parallel.hpp>
#include <locus/train/layers.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

using namespace locus;
namespace nn = locus::train::nn;

int main(int argc, char** argv) try {
  std::size_t max_steps = 0, epochs = 1, devices = 2, c1 = 32, c2 = 64, test_images = 0;
  double expect = 0;
  std::string policy = "sync";
  bool log_placement = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--log-device-placement") {
      log_placement = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument("option " + std::string(flag) + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--max-steps") max_steps = std::stoul(value);
    else if (flag == "--epochs") epochs = std::stoul(value);
    else if (flag == "--devices" && (value == "1" || value == "2")) devices = std::stoul(value);
    else if (flag == "--test-images") test_images = std::stoul(value);
    else if (flag == "--expect-accuracy") expect = std::stod(value);
    else if (flag == "--policy" && (value == "sync" || value == "hogwild")) policy = value;
    else if (flag == "--channels" && value.find(',') != std::string::npos) {
      c1 = std::stoul(value.substr(0, value.find(',')));
      c2 = std::stoul(value.substr(value.find(',') + 1));
    } else {
      throw std::invalid_argument("unknown option " + std::string(flag) + " " + value);
    }
  }

  // ---- the network: 28x28 -> 28x28 -> 14x14 -> 14x14 -> 7x7, then two dense layers ----
  train::sequential cnn{nn::reshape(shape{1, 28, 28}),
                        nn::conv2d(1, c1, 3, {.padding = 1}), nn::relu, nn::max_pool2d(2),
                        nn::conv2d(c1, c2, 3, {.padding = 1}), nn::relu, nn::max_pool2d(2),
                        nn::flatten, nn::dense(c2 * 7 * 7, 128), nn::relu, nn::dense(128, 10)};

  const auto train_set = data::fashion_mnist::load_train();
  auto test_set = data::fashion_mnist::load_test();
  if (test_images != 0 && test_images < test_set.size()) {
    const std::size_t row = test_set.images.extent(1);
    const auto pixels = test_set.images.to_vector();
    const auto labels = test_set.labels.to_vector();
    test_set = data::make_dataset(std::span(pixels).first(test_images * row), row, std::span(labels).first(test_images),
                                  data::fashion_mnist::classes);
  }
#if LOCUS_HAS_GPUS
  if (gpu_count() < 2) configure_logical_gpus(2);
  using D0 = gpu<0>;
  using D1 = gpu<1>;
#else
  using D0 = cpu;  // a build without GPUs: one replica
  using D1 = cpu;
  devices = 1;
#endif
  train::fit_options options;
  options.epochs = epochs;
  options.max_steps = max_steps;
  options.batch = 128;
  options.log_every = 0;
  options.bar = train::progress_bar::off;
  // Where the network's operations run: its forward pass over two images on the last device, with
  // the placement log on (TensorFlow's log_device_placement), the convolutions and poolings shown.
  if (log_placement) {
    const auto params = cnn.init<D1>();
    const auto two = to<D1>(tensor<float, cpu, 2>(shape{2, 784}, std::vector<float>(2 * 784, 0.5f)));
    const scoped_placement_log log([](std::string_view line) {
      if (line.find("conv2d") != std::string_view::npos || line.find("pool") != std::string_view::npos)
        std::printf("%.*s\n", int(line.size()), line.data());
    });
    (void)cnn.logits(params, two);
  }
  const auto report = [&](const char* name, auto& trainer, const train::fit_result& r) {
    const double accuracy = trainer.accuracy(test_set);
    std::printf("%s on %zu device%s: %zu parameters, %zu steps, test accuracy %.4f (%zu images)\n", name, devices,
                devices == 1 ? "" : "s", trainer.parameter_count(), r.steps, accuracy, test_set.size());
    if (accuracy < expect) {
      std::printf("FAILED: %s: accuracy %.4f below %.4f\n", name, accuracy, expect);
      return 1;
    }
    return 0;
  };
  const auto train_with = [&]<class Policy, class... D>(const char* name) {
    train::data_parallel<Policy, D...> trainer{cnn, train::adamw{1e-3f}};
    const auto r = trainer.fit(train_set, options);
    return report(name, trainer, r);
  };
  // Two devices only where there are GPUs (real or emulated): the cpu is one device.
  constexpr bool two_devices = !std::is_same_v<D0, D1>;
  const bool hogwild = policy == "hogwild";
  if constexpr (two_devices) {
    if (devices == 2) {
      return hogwild ? train_with.template operator()<train::hogwild, D0, D1>("hogwild")
                     : train_with.template operator()<train::sync_average, D0, D1>("sync_average");
    }
  }
  return hogwild ? train_with.template operator()<train::hogwild, D0>("hogwild")
                 : train_with.template operator()<train::sync_average, D0>("sync_average");
} catch (const std::exception& e) {
  std::fprintf(stderr, "cnn_train: %s\n", e.what());
  return 1;
}
