// Host benchmarks, side by side in one run (2^25 floats and more: run on an idle machine):
//   fused elementwise vs a hand-written OpenMP loop, the same as unfused Thrust calls, Eigen Tensor
//   sum and dot vs a hand OpenMP reduction and Eigen
//   matmul at the MLP's shapes and 1024^3 vs a direct cblas_sgemm call
// Usage: bench_host [--quick]
#include "harness.hpp"

#include <locus/locus.hpp>

#include <cstring>
#include <omp.h>

#include <thrust/system/omp/execution_policy.h>
#include <thrust/transform.h>

#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/Tensor>

using namespace locus;
using locus_bench::header;
using locus_bench::keep;
using locus_bench::time_per_call;

namespace {

struct inputs {
  std::size_t n;
  std::vector<tensor<float, cpu>> x;  // x[0..5]
  tensor<float, cpu> y;
  explicit inputs(std::size_t n_) : n(n_), y(shape{n_}) {
    for (int i = 0; i < 6; ++i) x.emplace_back(locus_test_values(i));
  }
  tensor<float, cpu> locus_test_values(int seed) const {
    return on<cpu>(random::uniform<float>(shape{n}, static_cast<std::uint64_t>(seed), 0.5, 1.5));
  }
  float* p(int i) { return x[static_cast<std::size_t>(i)].data(); }
};

/// Issue 28: a bfloat16 (half) triad moves half the bytes of a float one; it computes in float
/// (widen, fma, round to nearest even). Target: bytes per second >= 0.9x the float triad's.
void sixteen_bit(std::size_t n) {
  const auto f0 = on<cpu>(random::uniform<float>(shape{n}, 1, 0.5, 1.5));
  const auto f1 = on<cpu>(random::uniform<float>(shape{n}, 2, 0.5, 1.5));
  tensor<float, cpu> yf(shape{n});
  const double t_float = time_per_call([&] { yf = 1.5f * f0 + f1; });
  const auto row = [&](const char* name, auto tag) {
    using H = decltype(tag);
    const tensor<H, cpu> x = cast<H>(f0), z = cast<H>(f1);
    tensor<H, cpu> y(shape{n});
    const double t = time_per_call([&] { y = 1.5f * x + z; });
    // The same loop in the baseline instruction set (what the host ran before its loops storing
    // 16-bit values were compiled for AVX2 and AVX-512 too).
    const auto isa = backend::detail::sixteen_bit_isa;
    backend::detail::sixteen_bit_isa = backend::detail::host_isa::baseline;
    const double t_base = time_per_call([&] { y = 1.5f * x + z; });
    backend::detail::sixteen_bit_isa = isa;
    const double bw16 = 3.0 * 2 * double(n) / t / 1e9, bw32 = 3.0 * 4 * double(n) / t_float / 1e9;
    std::printf("| %s | 2^%d | %.2f | %.2f | %.2f | %.2f | %.2f | **%.2f** |\n", name, static_cast<int>(std::log2(double(n))),
                t * 1e6, t_base * 1e6, t_float * 1e6, bw16, bw32, bw16 / bw32);
  };
  row("bfloat16", bfloat16{});
  row("half", half{});
}

void elementwise(std::size_t n, Eigen::ThreadPoolDevice& eigen) {
  inputs in(n);
  const float a = 1.5f;
  float *x = in.p(0), *z = in.p(1), *y = in.y.data();
  float *x2 = in.p(2), *x3 = in.p(3), *x4 = in.p(4), *x5 = in.p(5);
  const double triad_bytes = 3.0 * 4 * double(n), six_bytes = 7.0 * 4 * double(n);
  const bool big = n >= backend::serial_threshold;

  // y = a * x + z
  const double t_locus = time_per_call([&] { in.y = a * in.x[0] + in.x[1]; });
  const double t_omp = time_per_call([&] {
#pragma omp parallel for simd if (big)
    for (std::size_t i = 0; i < n; ++i) y[i] = a * x[i] + z[i];
  });
  const double t_serial = time_per_call([&] {
    for (std::size_t i = 0; i < n; ++i) y[i] = a * x[i] + z[i];
    keep(y[0]);
  });
  std::vector<float> tmp(n);
  const double t_unfused = time_per_call([&] {
    thrust::transform(thrust::omp::par, x, x + n, tmp.data(), [a](float v) { return a * v; });
    thrust::transform(thrust::omp::par, tmp.data(), tmp.data() + n, z, y, [](float u, float v) { return u + v; });
  });
  Eigen::TensorMap<Eigen::Tensor<float, 1>> ey(y, static_cast<Eigen::Index>(n)), ex(x, static_cast<Eigen::Index>(n)),
      ez(z, static_cast<Eigen::Index>(n));
  const double t_eigen = time_per_call([&] { ey.device(eigen) = ex * a + ez; });
  const double hand = std::min(t_omp, t_serial);
  std::printf("| y = a*x + z | 2^%d | %.2f | %.2f | %.2f | %.2f | %.2f | **%.2f** | %.2f | %.2f |\n",
              static_cast<int>(std::log2(double(n))), triad_bytes / t_locus / 1e9, t_omp * 1e6, t_serial * 1e6,
              t_unfused * 1e6, t_eigen * 1e6, hand / t_locus, t_eigen / t_locus, t_unfused / t_locus);

  // y = (x0 * x1 + x2 * x3 - x4) / (x5 + 1): six operands
  const double s_locus = time_per_call([&] { in.y = (in.x[0] * in.x[1] + in.x[2] * in.x[3] - in.x[4]) / (in.x[5] + 1.f); });
  const double s_omp = time_per_call([&] {
#pragma omp parallel for simd if (big)
    for (std::size_t i = 0; i < n; ++i) y[i] = (x[i] * z[i] + x2[i] * x3[i] - x4[i]) / (x5[i] + 1.f);
  });
  const double s_serial = time_per_call([&] {
    for (std::size_t i = 0; i < n; ++i) y[i] = (x[i] * z[i] + x2[i] * x3[i] - x4[i]) / (x5[i] + 1.f);
    keep(y[0]);
  });
  std::vector<float> t1(n), t2(n);
  const double s_unfused = time_per_call([&] {
    auto pol = thrust::omp::par;
    thrust::transform(pol, x, x + n, z, t1.data(), [](float u, float v) { return u * v; });
    thrust::transform(pol, x2, x2 + n, x3, t2.data(), [](float u, float v) { return u * v; });
    thrust::transform(pol, t1.data(), t1.data() + n, t2.data(), t1.data(), [](float u, float v) { return u + v; });
    thrust::transform(pol, t1.data(), t1.data() + n, x4, t1.data(), [](float u, float v) { return u - v; });
    thrust::transform(pol, x5, x5 + n, t2.data(), [](float v) { return v + 1.f; });
    thrust::transform(pol, t1.data(), t1.data() + n, t2.data(), y, [](float u, float v) { return u / v; });
  });
  Eigen::TensorMap<Eigen::Tensor<float, 1>> e2(x2, static_cast<Eigen::Index>(n)), e3(x3, static_cast<Eigen::Index>(n)),
      e4(x4, static_cast<Eigen::Index>(n)), e5(x5, static_cast<Eigen::Index>(n));
  const double s_eigen = time_per_call([&] { ey.device(eigen) = (ex * ez + e2 * e3 - e4) / (e5 + 1.f); });
  const double s_hand = std::min(s_omp, s_serial);
  std::printf("| 6 operands | 2^%d | %.2f | %.2f | %.2f | %.2f | %.2f | **%.2f** | %.2f | %.2f |\n",
              static_cast<int>(std::log2(double(n))), six_bytes / s_locus / 1e9, s_omp * 1e6, s_serial * 1e6,
              s_unfused * 1e6, s_eigen * 1e6, s_hand / s_locus, s_eigen / s_locus, s_unfused / s_locus);
}

void reductions(std::size_t n, Eigen::ThreadPoolDevice& eigen) {
  inputs in(n);
  float *x = in.p(0), *z = in.p(1);
  const bool big = n >= backend::serial_threshold;
  float sink = 0;
  const double t_sum = time_per_call([&] { sink += on<cpu>(sum(in.x[0])).item(); });
  const double t_sum_omp = time_per_call([&] {
    float s = 0;
#pragma omp parallel for simd reduction(+ : s) if (big)
    for (std::size_t i = 0; i < n; ++i) s += x[i];
    sink += s;
  });
  const double t_sum_serial = time_per_call([&] {
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (std::size_t i = 0; i < n; ++i) s += x[i];
    sink += s;
  });
  Eigen::TensorMap<Eigen::Tensor<float, 1>> ex(x, static_cast<Eigen::Index>(n)), ez(z, static_cast<Eigen::Index>(n));
  Eigen::Tensor<float, 0> out;
  const double t_sum_eigen = time_per_call([&] { out.device(eigen) = ex.sum(); sink += out(); });
  const double t_dot = time_per_call([&] { sink += on<cpu>(dot(in.x[0], in.x[1])).item(); });
  const double t_dot_omp = time_per_call([&] {
    float s = 0;
#pragma omp parallel for simd reduction(+ : s) if (big)
    for (std::size_t i = 0; i < n; ++i) s += x[i] * z[i];
    sink += s;
  });
  const double t_dot_serial = time_per_call([&] {
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (std::size_t i = 0; i < n; ++i) s += x[i] * z[i];
    sink += s;
  });
  const double t_dot_eigen = time_per_call([&] { out.device(eigen) = (ex * ez).sum(); sink += out(); });
  keep(sink);
  const int lg = static_cast<int>(std::log2(double(n)));
  std::printf("| sum | 2^%d | %.2f | %.2f | %.2f | %.2f | %.2f | **%.2f** | %.2f |\n", lg, 4.0 * n / t_sum / 1e9,
              t_sum * 1e6, t_sum_omp * 1e6, t_sum_serial * 1e6, t_sum_eigen * 1e6,
              std::min(t_sum_omp, t_sum_serial) / t_sum, t_sum_eigen / t_sum);
  std::printf("| dot | 2^%d | %.2f | %.2f | %.2f | %.2f | %.2f | **%.2f** | %.2f |\n", lg, 8.0 * n / t_dot / 1e9,
              t_dot * 1e6, t_dot_omp * 1e6, t_dot_serial * 1e6, t_dot_eigen * 1e6,
              std::min(t_dot_omp, t_dot_serial) / t_dot, t_dot_eigen / t_dot);
}

void products(std::size_t m, std::size_t k, std::size_t n) {
  auto a = on<cpu>(random::uniform<float>(shape{m, k}, 1, -1.0, 1.0));
  auto b = on<cpu>(random::uniform<float>(shape{k, n}, 2, -1.0, 1.0));
  tensor<float, cpu, 2> c(shape{m, n});
  const double t_locus = time_per_call([&] { c = matmul(a, b); }, 7);
#if defined(LOCUS_HAS_CBLAS) && LOCUS_HAS_CBLAS
  const locus_bench::blas_threads best(backend::host_threads());  // the BLAS's own threads, as it ships
  const double t_blas = time_per_call([&] {
    cblas_sgemm(101, 111, 111, int(m), int(n), int(k), 1.f, a.data(), int(k), b.data(), int(n), 0.f, c.data(), int(n));
  }, 7);
#else
  const double t_blas = t_locus;
#endif
  const double flops = 2.0 * double(m) * double(n) * double(k);
  std::printf("| %zux%zu x %zux%zu | %.1f | %.1f | %.1f | **%.3f** |\n", m, k, k, n, flops / t_locus / 1e9,
              flops / t_blas / 1e9, t_locus * 1e6, t_blas / t_locus);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int threads = omp_get_max_threads();
  std::printf("locus host benchmarks: %d OpenMP threads, Thrust OMP system, BLAS: %s\n", threads,
#if defined(LOCUS_HAS_CBLAS) && LOCUS_HAS_CBLAS
              "CBLAS"
#else
              "none (blocked loop)"
#endif
  );
  Eigen::ThreadPool pool(threads);
  Eigen::ThreadPoolDevice eigen(&pool, threads);
  std::vector<std::size_t> sizes{std::size_t{1} << 12, std::size_t{1} << 18};
  if (!quick) sizes.push_back(std::size_t{1} << 25);

  header("Fused elementwise (GB/s counts bytes read + written; ratios > 1: locus faster; hand = faster of OMP and serial)",
         {"expression", "n", "locus GB/s", "hand OMP us", "serial us", "unfused Thrust us", "Eigen us", "hand/locus",
          "Eigen/locus", "unfused/locus"});
  for (auto n : sizes) elementwise(n, eigen);

  header("16-bit triad y = 1.5 * x + z against the float one (GB/s counts 2 or 4 bytes per element moved)",
         {"type", "n", "16-bit us", "16-bit us, baseline ISA", "float us", "16-bit GB/s", "float GB/s", "GB/s ratio"});
  for (auto n : sizes) sixteen_bit(n);

  header("Reductions (ratios > 1: locus faster)",
         {"op", "n", "locus GB/s", "locus us", "hand OMP us", "serial simd us", "Eigen us", "hand/locus", "Eigen/locus"});
  for (auto n : sizes) reductions(n, eigen);

  header("matmul, float (ratio: direct BLAS time / locus time)", {"shape", "locus GFLOP/s", "BLAS GFLOP/s", "locus us", "BLAS/locus"});
  products(256, 784, 256);
  products(256, 256, 10);
  if (!quick) products(1024, 1024, 1024);
  return 0;
}
