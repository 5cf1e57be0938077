// The main job's MLP with libtorch's C++ frontend (Debian's libtorch-dev), for bench/load.sh's
// side-by-side: 784-256-10 with ReLU, SGD 0.1 with momentum 0.9, batches of 256 over Fashion-MNIST's
// training set (the uncompressed IDX files in DIR), one epoch; prints "trained N steps in X s" as the
// example does.
//   g++ -std=c++17 -O2 -I/usr/include/torch/csrc/api/include bench/mlp_libtorch.cpp -ltorch -ltorch_cpu -lc10
//   ./a.out DIR
#include <torch/torch.h>

#include <chrono>
#include <cstdio>

struct net : torch::nn::Module {
  net() : fc1(register_module("fc1", torch::nn::Linear(784, 256))), fc2(register_module("fc2", torch::nn::Linear(256, 10))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x.view({-1, 784})))); }
  torch::nn::Linear fc1, fc2;
};

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR (train-images-idx3-ubyte and train-labels-idx1-ubyte, uncompressed)\n", argv[0]);
    return 2;
  }
  auto model = std::make_shared<net>();
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto data = torch::data::datasets::MNIST(argv[1]).map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(data), torch::data::DataLoaderOptions(256).drop_last(true));
  const auto start = std::chrono::steady_clock::now();
  std::size_t steps = 0;
  double last = 0;
  for (auto& batch : *loader) {
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(batch.data), batch.target);
    loss.backward();
    opt.step();
    last = loss.item<double>();
    ++steps;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("last loss %.4f; trained %zu steps in %.2f s\n", last, steps, s);
}
