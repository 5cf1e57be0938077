// Training throughput on the host, side by side in one run: one epoch of the 784-256-10 MLP on
// Fashion-MNIST (batch 256, SGD with momentum) with locus on 1, 2 and 4 devices (the cpu, then
// emulated GPUs sharing its cores). The MLP's gradients come from locus::ad (train::mlp, and the
// same network as train::sequential), compared with the hand-written backward pass
// (train::handwritten_mlp) and against
//   - the floor: the same epoch's five matrix products per step alone, as direct cblas_sgemm calls;
//   - the numpy reference ../shared/reference/mlp_numpy.py (same recipe), when python3 and numpy
//     are there (its own timer, printed to 0.1 s);
//   - PyTorch: ../shared/reference/mlp_torch.py (same recipe as a PyTorch user writes it), on 1 and
//     2 threads, when Debian's python3-torch is there (its own timer: training only).
// Each figure is the median of `reps` epochs (default 5; the first argument changes it).
#include <locus/locus.hpp>
#include <locus/train/data_parallel.hpp>
#include <locus/train/layers.hpp>
#include <locus/train/mlp.hpp>
#include <locus/train/softmax_regression.hpp>

#include "harness.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace locus;
using namespace locus::train;

namespace {

using clock_type = std::chrono::steady_clock;
#ifndef LOCUS_PYTHON
#  define LOCUS_PYTHON "/usr/bin/python3"  // Debian's, where python3-numpy installs numpy
#endif

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

template <class Policy, class... Ds, class Model = mlp<float>>
double epoch_seconds(const data::labelled_images& train, int reps, float lr, Policy policy = {},
                     const Model& model = mlp<float>({784, 256, 10}, 1)) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    data_parallel<Policy, Ds...> trainer{model, sgd{lr, 0.9f}, policy};
    fit_options o;
    o.epochs = 1;
    o.batch = 256;
    o.log_every = 0;
    o.bar = progress_bar::off;
    t.push_back(trainer.fit(train, o).seconds);
  }
  return median(t);
}

#if LOCUS_HAS_GPUS
/// Host waits (host_waits) and kernel launches per training step in steady state, summed over the
/// list's GPUs: a fit of 60 steps less one of 10 (the first steps' set-up cancels out), over 50.
struct per_step {
  double waits = 0, launches = 0;
};
template <class Policy, class... Ds>
per_step counts_per_step(const data::labelled_images& train, Policy policy = {}) {
  const auto total = [] {
    std::size_t w = 0, l = 0;
    ((w += host_waits(id_of<Ds>), l += kernel_launches(id_of<Ds>)), ...);
    return std::pair{w, l};
  };
  const auto run = [&](std::size_t steps) {
    data_parallel<Policy, Ds...> trainer{mlp<float>({784, 256, 10}, 1), sgd{0.1f, 0.9f}, policy};
    fit_options o;
    o.epochs = 1;
    o.batch = 256;
    o.max_steps = steps;
    o.log_every = 0;
    o.bar = progress_bar::off;
    const auto before = total();
    const std::size_t done = trainer.fit(train, o).steps;
    const auto after = total();
    return std::tuple{after.first - before.first, after.second - before.second, done};
  };
  const auto [w10, l10, s10] = run(10);
  const auto [w60, l60, s60] = run(60);
  const double steps = double(s60 - s10);
  return {double(w60 - w10) / steps, double(l60 - l10) / steps};
}
#endif

#if LOCUS_HAS_CBLAS
/// The matrix products of one epoch alone: per step x W1, h W2, h^T dz, dz W2^T, x^T dh.
double blas_floor_seconds(std::size_t steps, int reps) {
  constexpr int B = 256, I = 784, H = 256, O = 10;
  constexpr int row_major = 101, no_trans = 111, trans = 112;
  std::vector<float> x(std::size_t(B) * I, 0.5f), w1(std::size_t(I) * H, 0.01f), w2(std::size_t(H) * O, 0.01f),
      h(std::size_t(B) * H), z(std::size_t(B) * O), dz(std::size_t(B) * O, 0.01f), dh(std::size_t(B) * H),
      dw1(std::size_t(I) * H), dw2(std::size_t(H) * O);
  const locus_bench::blas_threads best(backend::host_threads());  // the BLAS's own threads, as it ships
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = clock_type::now();
    for (std::size_t s = 0; s < steps; ++s) {
      cblas_sgemm(row_major, no_trans, no_trans, B, H, I, 1.f, x.data(), I, w1.data(), H, 0.f, h.data(), H);
      cblas_sgemm(row_major, no_trans, no_trans, B, O, H, 1.f, h.data(), H, w2.data(), O, 0.f, z.data(), O);
      cblas_sgemm(row_major, trans, no_trans, H, O, B, 1.f, h.data(), H, dz.data(), O, 0.f, dw2.data(), O);
      cblas_sgemm(row_major, no_trans, trans, B, H, O, 1.f, dz.data(), O, w2.data(), O, 0.f, dh.data(), H);
      cblas_sgemm(row_major, trans, no_trans, I, H, B, 1.f, x.data(), I, dh.data(), H, 0.f, dw1.data(), H);
    }
    t.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
    locus_bench::keep(dw1[0]);
  }
  return median(t);
}
#endif

/// The numpy reference's one-epoch time (seconds), or a negative number when it cannot run.
double numpy_seconds(int reps) {
  const char* script = LOCUS_SOURCE_DIR "/../shared/reference/mlp_numpy.py";
  if (std::FILE* f = std::fopen(script, "r")) std::fclose(f);
  else return -1;
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const std::string cmd = std::string(LOCUS_PYTHON " '") + script + "' 1 2> /dev/null";
    std::FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return -1;
    char line[256];
    double seconds = -1;
    while (std::fgets(line, sizeof line, p) != nullptr) {
      double acc = 0, s = 0;
      if (std::sscanf(line, "epoch 1: test accuracy %lf (%lf s)", &acc, &s) == 2) seconds = s;
    }
    if (::pclose(p) != 0 || seconds < 0) return -1;
    t.push_back(seconds);
  }
  return median(t);
}

/// The PyTorch peer's one-epoch time (seconds) on `threads` threads, or a negative number when it
/// cannot run (Debian's python3-torch, run by Debian's own python3).
double torch_seconds(int threads, int reps) {
  const char* script = LOCUS_SOURCE_DIR "/../shared/reference/mlp_torch.py";
  if (std::FILE* f = std::fopen(script, "r")) std::fclose(f);
  else return -1;
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const std::string cmd =
        std::string(LOCUS_PYTHON " '") + script + "' 1 256 0.1 0.9 " + std::to_string(threads) + " 2> /dev/null";
    std::FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return -1;
    char line[256];
    double seconds = -1;
    while (std::fgets(line, sizeof line, p) != nullptr) {
      double s = 0;
      if (std::sscanf(line, "epoch 1: %lf s", &s) == 1) seconds = s;
    }
    if (::pclose(p) != 0 || seconds < 0) return -1;
    t.push_back(seconds);
  }
  return median(t);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const auto train = data::fashion_mnist::load_train();
  const std::size_t steps = train.size() / 256;
  const double n = double(steps * 256);
  std::printf("one epoch: %zu steps of 256, median of %d epochs, %d host cores\n", steps, reps, backend::host_cores());

  // The three models' epochs interleaved (hand-written, ad, sequential, then again), so that a
  // drift of the machine's speed falls on all three alike.
  namespace nn = locus::train::nn;
  std::vector<double> t_hand, t_ad, t_seq;
  for (int r = 0; r < reps; ++r) {
    t_hand.push_back(epoch_seconds<sync_average, cpu>(train, 1, 0.1f, {}, handwritten_mlp<float>({784, 256, 10}, 1)));
    t_ad.push_back(epoch_seconds<sync_average, cpu>(train, 1, 0.1f));
    t_seq.push_back(epoch_seconds<sync_average, cpu>(train, 1, 0.1f, {},
                                                     sequential{nn::dense(784, 256), nn::relu, nn::dense(256, 10)}));
  }
  const double by_hand = median(t_hand), locus1 = median(t_ad);
  // The best epoch beside the median: on a machine shared with other work an epoch is only ever
  // slowed down, so the fastest of the interleaved epochs is the steadier estimate of the cost.
  const auto best = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
  locus_bench::header("gradients from locus::ad against the hand-written backward pass (sync_average, the cpu)",
                      {"model", "median epoch s", "best epoch s", "examples/sec", "/ hand-written (median)",
                       "/ hand-written (best)", "target"});
  const auto ad_row = [&](const char* model, const std::vector<double>& t) {
    std::printf("| %s | %.3f | %.3f | %.0f | %.3f | %.3f | %s |\n", model, median(t), best(t), n / median(t),
                median(t) / by_hand, best(t) / best(t_hand), &t == &t_hand ? "" : "<= 1.05");
  };
  ad_row("handwritten_mlp (backward pass by hand)", t_hand);
  ad_row("mlp (forward only, locus::ad)", t_ad);
  ad_row("sequential{dense, relu, dense} (locus::ad)", t_seq);

  locus_bench::header("locus (mlp on locus::ad, sync_average, 1 device) against the baselines",
                      {"baseline", "baseline s", "locus s", "locus examples/sec", "locus / baseline time", "target"});
#if LOCUS_HAS_CBLAS
  const double floor = blas_floor_seconds(steps, reps);
  std::printf("| matrix products alone (cblas_sgemm) | %.3f | %.3f | %.0f | %.2f | <= 1.15 |\n", floor, locus1, n / locus1,
              locus1 / floor);
#endif
  const double np = numpy_seconds(reps);
  if (np > 0)
    std::printf("| numpy reference (mlp_numpy.py) | %.1f | %.3f | %.0f | %.2f | <= 1 |\n", np, locus1, n / locus1,
                locus1 / np);
  else
    std::printf("| numpy reference | not run (python3 with numpy, or ../shared/reference, missing) | | | | |\n");
  for (int threads : {1, 2}) {
    const double pt = torch_seconds(threads, reps);
    if (pt > 0)
      std::printf("| PyTorch 1.13 (mlp_torch.py), %d thread%s | %.3f | %.3f | %.0f | %.2f | <= 1 |\n", threads,
                  threads == 1 ? "" : "s", pt, locus1, n / locus1, locus1 / pt);
    else
      std::printf("| PyTorch, %d thread%s | not run (Debian's python3-torch, or ../shared/reference, missing) | | | | |\n",
                  threads, threads == 1 ? "" : "s");
  }

#if LOCUS_HAS_GPUS
  locus_bench::header("examples/sec by policy and devices (emulated GPUs share the host's cores)",
                      {"policy", "devices", "epoch s", "examples/sec", "vs 1 device"});
  auto row = [&](const char* policy, int devices, double s, double one) {
    std::printf("| %s | %d | %.3f | %.0f | %.2f |\n", policy, devices, s, n / s, one / s);
  };
  const double s1 = epoch_seconds<sync_average, gpu<0>>(train, reps, 0.1f);
  row("sync_average", 1, s1, s1);
  row("sync_average", 2, epoch_seconds<sync_average, gpu<0>, gpu<1>>(train, reps, 0.1f), s1);
  row("sync_average", 4, epoch_seconds<sync_average, gpu<0>, gpu<1>, gpu<2>, gpu<3>>(train, reps, 0.1f), s1);
  // hogwild as the previous bench measured it (no look-ahead), each way of writing; then its defaults.
  const hogwild rmw{.lookahead = false, .writes = hogwild_writes::atomic_add};
  const hogwild ls{.lookahead = false, .writes = hogwild_writes::load_store};
  row("hogwild, atomic_add", 1, epoch_seconds<hogwild, gpu<0>>(train, reps, 0.1f, rmw), s1);
  row("hogwild, atomic_add", 2, epoch_seconds<hogwild, gpu<0>, gpu<1>>(train, reps, 0.025f, rmw), s1);
  row("hogwild, atomic_add", 4, epoch_seconds<hogwild, gpu<0>, gpu<1>, gpu<2>, gpu<3>>(train, reps, 0.0125f, rmw), s1);
  row("hogwild, load_store", 1, epoch_seconds<hogwild, gpu<0>>(train, reps, 0.1f, ls), s1);
  row("hogwild, load_store", 2, epoch_seconds<hogwild, gpu<0>, gpu<1>>(train, reps, 0.025f, ls), s1);
  row("hogwild, load_store", 4, epoch_seconds<hogwild, gpu<0>, gpu<1>, gpu<2>, gpu<3>>(train, reps, 0.0125f, ls), s1);
  row("hogwild (defaults)", 2, epoch_seconds<hogwild, gpu<0>, gpu<1>>(train, reps, 0.1f), s1);
  row("hogwild (defaults)", 4, epoch_seconds<hogwild, gpu<0>, gpu<1>, gpu<2>, gpu<3>>(train, reps, 0.1f), s1);
  row("local_sgd (period 4)", 2, epoch_seconds<local_sgd, gpu<0>, gpu<1>>(train, reps, 0.1f), s1);
  row("local_sgd (period 4)", 4, epoch_seconds<local_sgd, gpu<0>, gpu<1>, gpu<2>, gpu<3>>(train, reps, 0.1f), s1);

  // Issue 32: a step on GPUs should not make the host wait (on a real GPU each wait drains the
  // device's queue). Counted on emulated GPUs exactly where the CUDA build waits.
  locus_bench::header("host waits and kernel launches per step (steady state, summed over the GPUs)",
                      {"policy", "devices", "host waits / step", "kernel launches / step", "target"});
  const auto count_row = [](const char* policy, int devices, per_step c) {
    std::printf("| %s | %d | %.2f | %.1f | 0 waits |\n", policy, devices, c.waits, c.launches);
  };
  count_row("sync_average", 1, counts_per_step<sync_average, gpu<0>>(train));
  count_row("sync_average", 2, counts_per_step<sync_average, gpu<0>, gpu<1>>(train));
  count_row("hogwild", 2, counts_per_step<hogwild, gpu<0>, gpu<1>>(train));
  count_row("local_sgd (period 4)", 2, counts_per_step<local_sgd, gpu<0>, gpu<1>>(train));
#endif
  return 0;
}
