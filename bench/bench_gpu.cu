// GPU benchmarks (run by scripts/gpu-check.sh on a machine with a GPU), side by side in one run:
//   fused elementwise and reductions as a fraction of the device-to-device copy bandwidth
//   measured in the same run; matmul against a direct cublasSgemm call.
#include "harness.hpp"

#include <locus/locus.hpp>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>

using namespace locus;
using locus_bench::header;
using locus_bench::time_per_call;

namespace {
using G = gpu<0>;
constexpr device_id g0 = id_of<G>;

template <class F>
double timed(F&& f) {
  return time_per_call([&] {
    f();
    backend::synchronize(g0);
  }, 9, 0.05);
}
}  // namespace

int main() {
  if (gpu_count() == 0) {
    std::printf("bench_gpu: no GPU\n");
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, backend::registry::instance().physical_of(0));
  std::printf("locus GPU benchmarks on %s\n", prop.name);
  cudaStream_t s = backend::registry::instance().stream(g0);

  header("Bandwidth-bound kernels (fraction of the device-to-device copy bandwidth of this run)",
         {"kernel", "n", "GB/s", "copy GB/s", "fraction"});
  for (std::size_t n : {std::size_t{1} << 24, std::size_t{1} << 28}) {
    auto x = on<G>(random::uniform<float>(shape{n}, 1, 0.0, 1.0));
    auto z = on<G>(random::uniform<float>(shape{n}, 2, 0.0, 1.0));
    tensor<float, G> y(shape{n});
    const double t_copy = timed([&] { cudaMemcpyAsync(y.data(), x.data(), n * 4, cudaMemcpyDeviceToDevice, s); });
    const double copy_bw = 2.0 * 4 * double(n) / t_copy / 1e9;
    const double t_triad = timed([&] { y = 1.5f * x + z; });
    const double t_sum = timed([&] { auto r = on<G>(sum(x)); });
    const double t_dot = timed([&] { auto r = on<G>(dot(x, z)); });
    const auto row = [&](const char* name, double bytes, double t) {
      const double bw = bytes / t / 1e9;
      std::printf("| %s | 2^%d | %.0f | %.0f | **%.2f** |\n", name, static_cast<int>(std::log2(double(n))), bw, copy_bw,
                  bw / copy_bw);
    };
    row("y = a*x + z", 12.0 * double(n), t_triad);
    row("sum(x)", 4.0 * double(n), t_sum);
    row("dot(x, z)", 8.0 * double(n), t_dot);
  }

  header("matmul, float, against cublasSgemm", {"shape", "locus TFLOP/s", "cuBLAS TFLOP/s", "cuBLAS/locus"});
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
  cublasDestroy(h);
  return 0;
}
