// Convolution on the host, side by side in one run:
//   1. conv2d forward + backward (input and weight gradients, bias) of one batch of each of the
//      CNN's two convolutions, against the floor: the same three GEMMs (forward, dW, dcols) as
//      direct cblas_sgemm calls, im2col and the rest left out;
//   2. one epoch of the README's CNN on Fashion-MNIST (sync_average on the cpu, AdamW 1e-3, batch
//      128) against ../shared/reference/cnn_torch.py, the same network and recipe in PyTorch 1.13
//      (oneDNN convolutions) on 1 and 2 threads, when Debian's python3-torch is there.
//   bench_conv [reps] [epoch: 0 to skip part 2]
#include <locus/locus.hpp>
#include <locus/train/data_parallel.hpp>
#include <locus/train/layers.hpp>

#include "harness.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

using namespace locus;

namespace {

using clock_type = std::chrono::steady_clock;
#ifndef LOCUS_PYTHON
#  define LOCUS_PYTHON "/usr/bin/python3"
#endif

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}
template <class F>
double seconds_of(F&& f, int reps) {
  f();  // warm: the arena's blocks, BLAS's threads
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = clock_type::now();
    f();
    t.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
  }
  return median(t);
}

struct layer_case {
  const char* name;
  std::size_t n, c, hw, k;
};

void conv_row(const layer_case& lc, int reps) {
  const std::size_t n = lc.n, c = lc.c, hw = lc.hw, k = lc.k, patch = c * 9, rows = n * hw * hw;
  const tensor<float, cpu, 4> x(shape{n, c, hw, hw}, 0.5f), w(shape{k, c, 3, 3}, 0.01f);
  const tensor<float, cpu, 1> b(shape{k}, 0.f);
  const tensor<float, cpu, 4> g(shape{n, k, hw, hw}, 0.01f);
  const double locus_s = seconds_of(
      [&] {
        auto [loss, grads] = ad::value_and_grad(
            [&](const auto& p) {
              const auto& [X, W, B] = p;
              return sum(conv2d(X, W, B, {.padding = 1}) * g);
            },
            std::tie(x, w, b));
        locus_bench::keep(loss.item());
      },
      reps);
  double floor_s = -1;
#if LOCUS_HAS_CBLAS
  // The three products conv2d makes (ops/conv.hpp): y [K, NP] = W cols, dW = g cols^T, dcols = W^T g.
  std::vector<float> cols(patch * rows, 0.5f), wv(k * patch, 0.01f), yk(k * rows), gk(k * rows, 0.01f), dw(k * patch),
      dcols(patch * rows);
  constexpr int row_major = 101, no_trans = 111, trans = 112;
  const int R = int(rows), K = int(k), P = int(patch);
  const locus_bench::blas_threads best(backend::host_threads());  // the BLAS's own threads, as it ships
  floor_s = seconds_of(
      [&] {
        cblas_sgemm(row_major, no_trans, no_trans, K, R, P, 1.f, wv.data(), P, cols.data(), R, 0.f, yk.data(), R);
        cblas_sgemm(row_major, no_trans, trans, K, P, R, 1.f, gk.data(), R, cols.data(), R, 0.f, dw.data(), P);
        cblas_sgemm(row_major, trans, no_trans, P, R, K, 1.f, wv.data(), P, gk.data(), R, 0.f, dcols.data(), R);
        locus_bench::keep(dcols[0]);
      },
      reps);
#endif
  const double flops = 3.0 * 2.0 * double(rows) * double(k) * double(patch);
  std::printf("| %s [%zu, %zu, %zu, %zu] -> %zu, 3x3 pad 1 | %.2f | %.2f | %.1f | %.2f |\n", lc.name, n, c, hw, hw, k,
              locus_s * 1e3, floor_s * 1e3, flops / locus_s * 1e-9, floor_s > 0 ? locus_s / floor_s : 0.0);
}

/// cnn_torch.py's first epoch on `threads` threads: its training seconds and test accuracy.
std::pair<double, double> torch_epoch(int threads) {
  const char* script = LOCUS_SOURCE_DIR "/../shared/reference/cnn_torch.py";
  if (std::FILE* f = std::fopen(script, "r")) std::fclose(f);
  else return {-1, 0};
  const std::string cmd = std::string(LOCUS_PYTHON " '") + script + "' 1 128 " + std::to_string(threads) + " 2> /dev/null";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, 0};
  char line[256];
  double seconds = -1, acc = 0, eps = 0;
  while (std::fgets(line, sizeof line, p) != nullptr) {
    double s = 0, a = 0;
    if (std::sscanf(line, "epoch 1: %lf s (%lf examples/sec) test accuracy %lf", &s, &eps, &a) == 3) seconds = s, acc = a;
  }
  if (::pclose(p) != 0) return {-1, 0};
  return {seconds, acc};
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const bool epoch = argc > 2 ? std::atoi(argv[2]) != 0 : true;
  std::printf("%d host cores, median of %d\n", backend::host_cores(), reps);
  locus_bench::header("conv2d forward + backward (dx, dW, db) of one batch against its three GEMMs alone",
                      {"layer", "locus ms", "GEMM floor ms", "locus GFLOP/s (GEMM flops)", "locus / floor"});
  conv_row({"conv 1", 128, 1, 28, 32}, reps);
  conv_row({"conv 2", 128, 32, 14, 64}, reps);
  if (!epoch) return 0;

  namespace nn = train::nn;
  const train::sequential cnn{nn::reshape(shape{1, 28, 28}),
                              nn::conv2d(1, 32, 3, {.padding = 1}), nn::relu, nn::max_pool2d(2),
                              nn::conv2d(32, 64, 3, {.padding = 1}), nn::relu, nn::max_pool2d(2),
                              nn::flatten, nn::dense(64 * 7 * 7, 128), nn::relu, nn::dense(128, 10)};
  const auto train_set = data::fashion_mnist::load_train();
  const auto test_set = data::fashion_mnist::load_test();
  train::data_parallel<train::sync_average, cpu> trainer{cnn, train::adamw{1e-3f}};
  train::fit_options o;
  o.batch = 128;
  o.log_every = 0;
  o.bar = train::progress_bar::off;
  const auto r = trainer.fit(train_set, o);
  const double acc = trainer.accuracy(test_set);
  const double n = double(r.examples);
  locus_bench::header("one epoch of the CNN (AdamW 1e-3, batch 128): locus (sync_average, the cpu) against PyTorch",
                      {"run", "epoch s", "examples/sec", "test accuracy", "locus / this"});
  std::printf("| locus | %.1f | %.0f | %.4f | 1.00 |\n", r.seconds, n / r.seconds, acc);
  for (int threads : {1, 2}) {
    const auto [s, a] = torch_epoch(threads);
    if (s > 0)
      std::printf("| PyTorch 1.13 (cnn_torch.py), %d thread%s | %.1f | %.0f | %.4f | %.2f |\n", threads,
                  threads == 1 ? "" : "s", s, n / s, a, r.seconds / s);
    else
      std::printf("| PyTorch, %d thread%s | not run (Debian's python3-torch, or ../shared/reference, missing) | | | |\n",
                  threads, threads == 1 ? "" : "s");
  }
  return 0;
}
