// GPU benchmarks (run by scripts/gpu-check.sh on a machine with a GPU), side by side in one run:
//   - fused elementwise and reductions as a fraction of the device-to-device copy bandwidth
//     measured in the same run: locus's triad (its operands handed to CUB as inputs), the same
//     read by index (the launcher before), and cub::DeviceTransform called by hand;
//   - matmul against a direct cublasSgemm call;
//   - the all-reduce of dist::nccl against dist::in_process (one flat buffer per replica: the MLP's
//     gradient, 0.8 MB, and 64 MB), with NCCL's bus bandwidth as nccl-tests defines it;
//   - one Fashion-MNIST epoch of the 784-256-10 MLP (batch 256, SGD momentum) on 1 and 2 logical
//     GPUs, against the same epoch's five matrix products per step as bare cublasSgemm calls;
//   - one epoch of the 784-4096-4096-10 MLP (batch 1024, AdamW 1e-3, where the products dominate)
//     in float32 and in bfloat16 and float16 mixed precision (train::mixed), on gpu<0>
//     (bench/mlp_torch_gpu.py runs PyTorch's autocast on the same recipe).
// Usage: bench_gpu [epochs]   (median of `epochs` training epochs, default 3; 0 skips training)
#include "harness.hpp"

#include <locus/locus.hpp>
#include <locus/dist/nccl.hpp>
#include <locus/train/data_parallel.hpp>
#include <locus/train/mixed_precision.hpp>
#include <locus/train/mlp.hpp>
#include <locus/train/softmax_regression.hpp>

#include <cub/device/device_transform.cuh>
#include <cublas_v2.h>
#include <cuda/std/tuple>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace locus;
using locus_bench::header;
using locus_bench::time_per_call;

namespace {
using G = gpu<0>;

/// One all-reduce row: every replica's buffer filled with its index + 1, summed `calls` times
/// (timed), then checked: each element must be n(n+1)/2 once more after one more call from fresh values.
template <class Group, class... Ds>
void all_reduce_row(const char* name, std::size_t floats) {
  Group g;
  std::tuple<tensor<float, Ds, 1>...> bufs{tensor<float, Ds, 1>(shape{floats}, 0.f)...};
  auto views = std::apply([](auto&... b) { return dist::buffers<Ds...>{b.view()...}; }, bufs);
  const double sec = time_per_call([&] { g.all_reduce_sum(views); }, 5, 0.05);
  float k = 1.f;
  std::apply([&](auto&... b) { ((b = b * 0.f + (k++)), ...); }, bufs);
  g.all_reduce_sum(views);
  const float n = float(sizeof...(Ds)), want = n * (n + 1.f) / 2.f;
  bool ok = true;
  std::apply([&](auto&... b) { ((ok = ok && b.to_vector() == std::vector<float>(floats, want)), ...); }, bufs);
  const double bytes = double(floats) * sizeof(float), algbw = bytes / sec / 1e9;
  std::printf("| %s | %zu | %zu | %.1f | %.1f | %.1f | %s |\n", name, sizeof...(Ds), floats, sec * 1e6, algbw,
              algbw * 2.0 * (n - 1.0) / n, ok ? "yes" : "NO");
}
constexpr device_id g0 = id_of<G>;

template <class F>
double timed(F&& f) {
  return time_per_call([&] {
    f();
    backend::synchronize(g0);
  }, 9, 0.05);
}

struct triad_op {
  __device__ float operator()(float x, float z) const { return 1.5f * x + z; }
};

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

template <class Policy, class... Ds>
double epoch_seconds(const data::labelled_images& images, int reps, float lr, double* accuracy) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    train::mlp<float> model({784, 256, 10}, 1);
    train::data_parallel<Policy, Ds...> trainer{model, train::sgd{lr, 0.9f}};
    train::fit_options o;
    o.epochs = 1;
    o.batch = 256;
    o.log_every = 0;
    o.bar = train::progress_bar::off;
    t.push_back(trainer.fit(images, o).seconds);
    if (r + 1 == reps) *accuracy = trainer.accuracy(images);
  }
  return median(t);
}

/// Median seconds of one epoch of `model` on gpu<0>: batch 1024, AdamW 1e-3 (the wide MLP's recipe).
template <class M>
double wide_epoch_seconds(const M& model, const data::labelled_images& images, int reps, double* accuracy,
                          std::size_t* skipped) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    train::data_parallel<train::sync_average, G> trainer{model, train::adamw{1e-3f}};
    train::fit_options o;
    o.epochs = 1;
    o.batch = 1024;
    o.log_every = 0;
    o.bar = train::progress_bar::off;
    const auto result = trainer.fit(images, o);
    t.push_back(result.seconds);
    if (r + 1 == reps) {
      *accuracy = trainer.accuracy(images);
      *skipped = result.skipped;
    }
  }
  return median(t);
}

/// The matrix products of one epoch alone, as bare cublasSgemm calls (row-major spelled as
/// column-major with the operands swapped): per step x W1, h W2, h^T dz, dz W2^T, x^T dh.
double cublas_floor_seconds(cublasHandle_t h, cudaStream_t s, std::size_t steps, int reps) {
  constexpr int B = 256, I = 784, H = 256, O = 10;
  float *x, *w1, *w2, *hid, *z, *dz, *dh, *dw1, *dw2;
  float** buffers[] = {&x, &w1, &w2, &hid, &z, &dz, &dh, &dw1, &dw2};
  const int sizes[] = {B * I, I * H, H * O, B * H, B * O, B * O, B * H, I * H, H * O};
  for (int b = 0; b < 9; ++b) {
    cudaMalloc(buffers[b], sizeof(float) * std::size_t(sizes[b]));
    cudaMemset(*buffers[b], 0, sizeof(float) * std::size_t(sizes[b]));
  }
  const float one = 1.f, zero = 0.f;
  const auto N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  std::vector<double> t;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t k = 0; k < steps; ++k) {
      cublasSgemm(h, N, N, H, B, I, &one, w1, H, x, I, &zero, hid, H);      // hid = x W1
      cublasSgemm(h, N, N, O, B, H, &one, w2, O, hid, H, &zero, z, O);      // z = hid W2
      cublasSgemm(h, N, T, O, H, B, &one, dz, O, hid, H, &zero, dw2, O);    // dW2 = hid^T dz
      cublasSgemm(h, T, N, H, B, O, &one, w2, O, dz, O, &zero, dh, H);      // dh = dz W2^T
      cublasSgemm(h, N, T, H, I, B, &one, dh, H, x, I, &zero, dw1, H);      // dW1 = x^T dh
    }
    cudaStreamSynchronize(s);
    if (r > 0) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  for (float* p : {x, w1, w2, hid, z, dz, dh, dw1, dw2}) cudaFree(p);
  return median(t);
}
}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a log file even if a later step aborts
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 3;
  if (gpu_count() == 0) {
    std::printf("bench_gpu: no GPU\n");
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, backend::registry::instance().physical_of(0));
  std::printf("locus GPU benchmarks on %s (%d multiprocessors)\n", prop.name, prop.multiProcessorCount);
  cudaStream_t s = backend::registry::instance().stream(g0);

  header("Bandwidth-bound kernels (fraction of the device-to-device copy bandwidth of this run)",
         {"kernel", "n", "GB/s", "copy GB/s", "fraction of copy"});
  for (std::size_t n : {std::size_t{1} << 24, std::size_t{1} << 28}) {
    auto x = on<G>(random::uniform<float>(shape{n}, 1, 0.0, 1.0));
    auto z = on<G>(random::uniform<float>(shape{n}, 2, 0.0, 1.0));
    tensor<float, G> y(shape{n});
    const double t_copy = timed([&] { cudaMemcpyAsync(y.data(), x.data(), n * 4, cudaMemcpyDeviceToDevice, s); });
    const double copy_bw = 2.0 * 4 * double(n) / t_copy / 1e9;
    const double t_triad = timed([&] { y = 1.5f * x + z; });
    backend::detail::prefer_index_kernels = true;
    const double t_index = timed([&] { y = 1.5f * x + z; });
    backend::detail::prefer_index_kernels = false;
    const double t_cub = timed([&] {
      cub::DeviceTransform::Transform(::cuda::std::make_tuple(x.data(), z.data()), y.data(), n, triad_op{}, s);
    });
    // A broadcast reads by index: relu(m + row) over [n / 1024, 1024].
    const std::size_t cols = 1024, rows = n / cols;
    tensor_view<const float, G, 2> m(x.data(), shape{rows, cols});
    tensor_view<const float, G> row(z.data(), shape{cols});
    tensor_view<float, G, 2> out(y.data(), shape{rows, cols});
    const double t_bias = timed([&] { out = relu(m + row); });
    const double t_sum = timed([&] { auto r = on<G>(sum(x)); });
    const double t_dot = timed([&] { auto r = on<G>(dot(x, z)); });
    const auto row_of = [&](const char* name, double bytes, double t) {
      const double bw = bytes / t / 1e9;
      std::printf("| %s | 2^%d | %.0f | %.0f | **%.2f** |\n", name, static_cast<int>(std::log2(double(n))), bw, copy_bw,
                  bw / copy_bw);
    };
    row_of("locus: y = 1.5f * x + z (operands as CUB inputs)", 12.0 * double(n), t_triad);
    row_of("locus, the same read by index (the launcher before)", 12.0 * double(n), t_index);
    row_of("baseline: cub::DeviceTransform called by hand", 12.0 * double(n), t_cub);
    row_of("locus: relu(m + row), a broadcast (by index)", 8.0 * double(n), t_bias);
    row_of("locus: sum(x)", 4.0 * double(n), t_sum);
    row_of("locus: dot(x, z)", 8.0 * double(n), t_dot);
  }

  header("matmul, float, against cublasSgemm", {"shape", "locus TFLOP/s", "cuBLAS TFLOP/s", "locus / cuBLAS"});
  cublasHandle_t h;
  cublasCreate(&h);
  cublasSetStream(h, s);
  for (std::size_t m : {std::size_t{256}, std::size_t{1024}, std::size_t{4096}}) {
    const std::size_t k = m == 256 ? 784 : m, n = m;
    auto a = on<G>(random::uniform<float>(shape{m, k}, 3, -1.0, 1.0));
    auto b = on<G>(random::uniform<float>(shape{k, n}, 4, -1.0, 1.0));
    tensor<float, G, 2> c(shape{m, n});
    const double t_locus = timed([&] { c = matmul(a, b); });
    const float one = 1.f, zero = 0.f;
    const double t_cublas = timed([&] {
      cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(m), int(k), &one, b.data(), int(n), a.data(), int(k), &zero,
                  c.data(), int(n));
    });
    const double flops = 2.0 * double(m) * double(n) * double(k);
    std::printf("| %zux%zu x %zux%zu | %.1f | %.1f | **%.3f** |\n", m, k, k, n, flops / t_locus / 1e12,
                flops / t_cublas / 1e12, t_cublas / t_locus);
  }

  // Issue 28: 16-bit products on the tensor cores (targets: >= 0.9x cublasGemmEx by hand, >= 8x
  // locus's float product of the same shape) and a 16-bit triad's bandwidth.
  header("matmul, bfloat16 (float accumulation), against cublasGemmEx by hand and locus's float product",
         {"shape", "locus bf16 TFLOP/s", "cublasGemmEx TFLOP/s", "locus / cuBLAS", "locus float TFLOP/s",
          "bf16 / float"});
  for (std::size_t m : {std::size_t{1024}, std::size_t{4096}}) {
    auto af = on<G>(random::uniform<float>(shape{m, m}, 3, -1.0, 1.0));
    auto bf = on<G>(random::uniform<float>(shape{m, m}, 4, -1.0, 1.0));
    tensor<bfloat16, G, 2> a = cast<bfloat16>(af), b = cast<bfloat16>(bf), c(shape{m, m});
    tensor<float, G, 2> cf(shape{m, m});
    const double t_locus = timed([&] { c = matmul(a, b); });
    const double t_float = timed([&] { cf = matmul(af, bf); });
    const float one = 1.f, zero = 0.f;
    const double t_cublas = timed([&] {
      cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, int(m), int(m), int(m), &one, b.data(), CUDA_R_16BF, int(m), a.data(),
                   CUDA_R_16BF, int(m), &zero, c.data(), CUDA_R_16BF, int(m), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    });
    const double flops = 2.0 * double(m) * double(m) * double(m);
    std::printf("| %zu^3 | %.1f | %.1f | **%.3f** | %.1f | **%.1f** |\n", m, flops / t_locus / 1e12,
                flops / t_cublas / 1e12, t_cublas / t_locus, flops / t_float / 1e12, t_float / t_locus);
  }
  {
    header("bfloat16 triad y = 1.5 * x + z (bytes moved / copy bandwidth of the same bytes)",
           {"n", "bf16 GB/s", "float GB/s", "bf16 time / float time"});
    const std::size_t n = std::size_t{1} << 28;
    tensor<bfloat16, G> x = cast<bfloat16>(random::uniform<float>(shape{n}, 1, 0.0, 1.0));
    tensor<bfloat16, G> z = cast<bfloat16>(random::uniform<float>(shape{n}, 2, 0.0, 1.0));
    tensor<bfloat16, G> y(shape{n});
    auto xf = on<G>(random::uniform<float>(shape{n}, 1, 0.0, 1.0));
    auto zf = on<G>(random::uniform<float>(shape{n}, 2, 0.0, 1.0));
    tensor<float, G> yf(shape{n});
    const double t16 = timed([&] { y = 1.5f * x + z; });
    const double t32 = timed([&] { yf = 1.5f * xf + zf; });
    std::printf("| 2^28 | %.0f | %.0f | **%.2f** |\n", 6.0 * double(n) / t16 / 1e9, 12.0 * double(n) / t32 / 1e9,
                t16 / t32);
  }


  {
    header("all-reduce of one flat buffer per replica, time per call; busbw = algbw * 2(n-1)/n as nccl-tests "
           "defines it (n = 1: no traffic)",
           {"communicator", "replicas", "floats", "us", "algbw GB/s", "busbw GB/s", "sums right"});
    for (std::size_t floats : {std::size_t(203532), std::size_t(16) << 20}) {
      all_reduce_row<dist::in_process::group<G>, G>("in_process", floats);
#if LOCUS_HAS_NCCL
      all_reduce_row<dist::nccl::group<G>, G>("nccl", floats);
#endif
      if (backend::registry::instance().physical_gpus() >= 2 && gpu_count() >= 2) {
        all_reduce_row<dist::in_process::group<G, gpu<1>>, G, gpu<1>>("in_process", floats);
#if LOCUS_HAS_NCCL
        all_reduce_row<dist::nccl::group<G, gpu<1>>, G, gpu<1>>("nccl", floats);
#endif
      }
    }
#if !LOCUS_HAS_NCCL
    std::printf("(this build has no NCCL: LOCUS_HAS_NCCL is 0)\n");
#endif
  }

  if (epochs > 0) {
    const auto images = data::fashion_mnist::load_train();
    const std::size_t steps = images.size() / 256;
    const double examples = double(steps * 256);
    if (gpu_count() < 2) configure_logical_gpus(2);
    cudaStream_t s0 = backend::registry::instance().stream(g0);
    cublasSetStream(h, s0);
    const double floor = cublas_floor_seconds(h, s0, steps, epochs);
    header("One epoch of the 784-256-10 MLP (batch 256, SGD momentum), median of " + std::to_string(epochs) +
               " epochs; gpu<0> and gpu<1> are logical GPUs on one card",
           {"run", "epoch s", "examples/sec", "matrix products alone s", "locus / floor time", "train accuracy"});
    const auto row = [&](const char* name, double sec, double acc) {
      std::printf("| %s | %.3f | %.0f | %.3f | %.2f | %.3f |\n", name, sec, examples / sec, floor, sec / floor, acc);
    };
    double acc = 0;
    double t = epoch_seconds<train::sync_average, G>(images, epochs, 0.1f, &acc);
    row("sync_average, gpu<0>", t, acc);
    t = epoch_seconds<train::sync_average, G, gpu<1>>(images, epochs, 0.1f, &acc);
    row("sync_average, gpu<0> gpu<1>", t, acc);
    t = epoch_seconds<train::hogwild, G, gpu<1>>(images, epochs, 0.025f, &acc);
    row("hogwild, gpu<0> gpu<1>", t, acc);

    namespace nn = train::nn;
    const train::sequential wide{nn::dense(784, 4096), nn::relu, nn::dense(4096, 4096), nn::relu, nn::dense(4096, 10)};
    const double wide_examples = double(images.size() / 1024 * 1024);
    header("One epoch of the 784-4096-4096-10 MLP (batch 1024, AdamW 1e-3) on gpu<0>, median of " +
               std::to_string(epochs) + " epochs: float32 against mixed precision (float32 masters)",
           {"run", "epoch s", "examples/sec", "float32 / this", "skipped steps", "train accuracy"});
    std::size_t skipped = 0;
    const double f32 = wide_epoch_seconds(wide, images, epochs, &acc, &skipped);
    const auto wide_row = [&](const char* name, double sec) {
      std::printf("| %s | %.3f | %.0f | %.2f | %zu | %.3f |\n", name, sec, wide_examples / sec, f32 / sec, skipped, acc);
    };
    wide_row("float32", f32);
    wide_row("mixed<bfloat16>", wide_epoch_seconds(train::mixed<bfloat16>(wide), images, epochs, &acc, &skipped));
    wide_row("mixed<half>", wide_epoch_seconds(train::mixed<locus::half>(wide), images, epochs, &acc, &skipped));
  }
  cublasDestroy(h);
  return 0;
}
