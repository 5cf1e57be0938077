#pragma once
// Matrix products: C = alpha * op(A) * op(B) + beta * C, row-major, on a device.
//   cuda GPUs   cuBLAS, one handle per logical GPU bound to its stream
//   host        the BLAS CMake found (LOCUS_HAS_CBLAS: cblas_sgemm/cblas_dgemm, OpenBLAS on Debian),
//               else (or with LOCUS_NO_BLAS defined) a portable cache-blocked loop; both in pieces on
//               the host pool (pool.hpp)
#include <locus/backend/parallel.hpp>
#include <locus/backend/registry.hpp>
#include <locus/config.hpp>
#include <locus/backend/omp.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/tensor/half.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <type_traits>

#if LOCUS_HAS_CUDA
#  include <cublas_v2.h>
#endif
#if defined(_OPENMP)
#  include <omp.h>
#endif
#if defined(__unix__)
#  include <dlfcn.h>
#endif

#if defined(LOCUS_HAS_CBLAS) && LOCUS_HAS_CBLAS && !defined(LOCUS_NO_BLAS)
// The four CBLAS entry points locus calls, declared here so that no cblas.h (whose location and
// enum spellings differ between vendors) is needed. The enum values are fixed by the CBLAS standard.
extern "C" {
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc);
void cblas_dgemm(int order, int transa, int transb, int m, int n, int k, double alpha, const double* a, int lda,
                 const double* b, int ldb, double beta, double* c, int ldc);
}
#endif

namespace locus::backend {

namespace detail {
/// The largest extent or row length handed to BLAS's int parameters: INT_MAX (tests lower it to run
/// the paths taken past it without 16 GB operands).
inline std::size_t blas_int_limit = static_cast<std::size_t>(std::numeric_limits<int>::max());

/// c[r, j] = beta * c[r, j] over an m x n matrix of row length ldc (0 when beta is 0, NaN or not).
template <class T>
struct scale_matrix {
  T* c;
  std::size_t n, ldc;
  T beta;
  LOCUS_HOST_DEVICE void operator()(std::size_t i) const {
    T& x = c[(i / n) * ldc + i % n];
    x = beta == T(0) ? T(0) : beta * x;
  }
};

/// c[r, j] = 0 over an m x n matrix of 16-bit values with row length ldc.
template <class H>
struct scale_matrix_16 {
  H* c;
  std::size_t n, ldc;
  LOCUS_HOST_DEVICE void operator()(std::size_t i) const { c[(i / n) * ldc + i % n] = H::from_bits(0); }
};

/// The portable product over rows [r0, r1) of C, the k loop blocked so a panel of B stays in cache.
template <class T>
void blocked_gemm_rows(bool ta, bool tb, std::size_t r0, std::size_t r1, std::size_t n, std::size_t k, T alpha,
                       const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  constexpr std::size_t kb = 256;
  for (std::size_t i = r0; i < r1; ++i) {
    T* ci = c + i * ldc;
    for (std::size_t j = 0; j < n; ++j) ci[j] = beta == T(0) ? T(0) : beta * ci[j];
    for (std::size_t p0 = 0; p0 < k; p0 += kb) {
      const std::size_t p1 = std::min(k, p0 + kb);
      for (std::size_t p = p0; p < p1; ++p) {
        const T aip = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);
        if (!tb) {
          const T* bp = b + p * ldb;
          for (std::size_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
        } else {
          for (std::size_t j = 0; j < n; ++j) ci[j] += aip * b[j * ldb + p];
        }
      }
    }
  }
}

/// A product is cut into pieces of at least this many multiply-adds for the host pool. Large enough
/// that no piece takes a BLAS's small-matrix path (OpenBLAS's below 100^3 on AVX-512, which sums
/// in another order): a piece's elements are then computed exactly as the whole product's are.
inline constexpr double gemm_piece_work = double(std::size_t{1} << 21);

/// Runs piece(r0, r1, c0, c1) over blocks of C's rows (or, when C is wider than tall, its columns):
/// up to two pieces per thread of the budget (a thread the system has not scheduled leaves half as
/// much to the others), each of gemm_piece_work multiply-adds or more.
template <class Piece>
void split_product(std::size_t m, std::size_t n, std::size_t k, const Piece& piece) {
  const double work = double(m) * double(n) * double(k);
  const bool by_rows = m >= n;
  const std::size_t extent = by_rows ? m : n;
  std::size_t pieces = 1;
  if (work >= 2 * gemm_piece_work) {
    const double most = std::min(double(extent), work / gemm_piece_work);
    pieces = static_cast<std::size_t>(std::min(double(2 * std::size_t(host_threads())), most));
  }
  if (pieces <= 1) {
    piece(0, m, 0, n);
    return;
  }
  const std::size_t step = (extent + pieces - 1) / pieces;
  pieces = (extent + step - 1) / step;
  parallel_chunks(pieces, [&](std::size_t p) {
    const std::size_t lo = p * step, hi = std::min(extent, lo + step);
    if (by_rows) piece(lo, hi, 0, n);
    else piece(0, m, lo, hi);
  });
}

/// A pthreads OpenBLAS (Debian's default libopenblas.so.0) has one thread count for the whole
/// process and no per-call setting: left alone, every piece of a product started its own OpenBLAS
/// threads beside locus's pool (on 2 cores, 4 threads; OpenBLAS's spin with sched_yield: a fifth
/// of a CNN step in the kernel's scheduler). The first product locus runs sets it to one thread
/// (found by name at run time, so any other CBLAS is left alone; a statically linked OpenBLAS whose
/// symbols are not exported is not found and keeps its threads). Relaxed atomics, no static guard:
/// setting it twice is harmless, and a fork() cannot copy a half-made guard.
using openblas_threads_fn = void (*)(int);
/// openblas_set_num_threads when the process's BLAS is a pthreads OpenBLAS (openblas_get_parallel()
/// is 1; 2 is its OpenMP build), else null.
inline openblas_threads_fn pthreads_openblas_threads() noexcept {
#if defined(__unix__)
  const auto parallel = reinterpret_cast<int (*)()>(::dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  const auto set_threads = reinterpret_cast<openblas_threads_fn>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (parallel != nullptr && set_threads != nullptr && parallel() == 1) return set_threads;
#endif
  return nullptr;
}
inline std::atomic<bool> openblas_threads_set{false};
inline void single_threaded_openblas() noexcept {
#if defined(LOCUS_HAS_CBLAS) && LOCUS_HAS_CBLAS && !defined(LOCUS_NO_BLAS)
  if (openblas_threads_set.load(std::memory_order_relaxed)) return;
  if (const auto set_threads = pthreads_openblas_threads()) set_threads(1);
  openblas_threads_set.store(true, std::memory_order_relaxed);
#endif
}

/// The BLAS runs a call on the calling thread while this lives: the calling thread's OpenMP thread
/// count is 1 (an OpenMP BLAS, as OpenBLAS's openmp build, then starts no team beside locus's
/// pool), and a pthreads OpenBLAS has been set to one thread (above).
struct blas_on_this_thread {
#if defined(_OPENMP)
  int previous = omp_get_max_threads();
  blas_on_this_thread() {
    single_threaded_openblas();
    if (previous != 1) omp_set_num_threads(1);
  }
  ~blas_on_this_thread() {
    if (previous != 1) omp_set_num_threads(previous);
  }
#else
  blas_on_this_thread() { single_threaded_openblas(); }
#endif
  blas_on_this_thread(const blas_on_this_thread&) = delete;
  blas_on_this_thread& operator=(const blas_on_this_thread&) = delete;
};

/// The portable product, its rows in parallel.
template <class T>
void blocked_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
                  std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  const int threads = double(m) * double(n) * double(k) >= 2 * gemm_piece_work ? host_threads() : 1;
  if (threads <= 1 || m < 2) {
    blocked_gemm_rows(ta, tb, 0, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  parallel_ranges(m, [&](std::size_t r0, std::size_t r1) {
    blocked_gemm_rows(ta, tb, r0, r1, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }, 1);
}

#if LOCUS_HAS_CUDA
inline cublasHandle_t cublas_handle(device_id d) {
  static std::mutex mutex;
  static auto* handles = new std::map<int, cublasHandle_t>();  // leaked: handles outlive tensors
  std::lock_guard lock(mutex);
  auto& h = (*handles)[d.index];
  if (h == nullptr) {
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
      throw cuda_error("cublasCreate", d.full_name(), -1, "cuBLAS could not be initialised");
  }
  return h;
}
inline void check_cublas(cublasStatus_t s, const char* call, device_id d) {
  if (s != CUBLAS_STATUS_SUCCESS) throw cuda_error(call, d.full_name(), static_cast<int>(s), "cuBLAS error");
}
#endif
}  // namespace detail

/// Row-major C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C, on device D. lda, ldb,
/// ldc are the row lengths of A, B and C as stored.
template <device D, class T>
void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc, [[maybe_unused]] bool tf32 = false) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "locus: matmul supports float and double");
  const device_id d = id_of<D>;
  auto& reg = registry::instance();
  reg.require(d);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // An empty inner extent: C = beta * C. BLAS would be handed a row length of 0 for A, which
    // cuBLAS refuses (CUBLAS_STATUS_INVALID_VALUE).
    for_each_index<D>(m * n, detail::scale_matrix<T>{c, n, ldc, beta});
    return;
  }
  reg.counters(d).launches.fetch_add(1, std::memory_order_relaxed);
  // CBLAS and cuBLAS's plain entry points count in int: an extent or row length past INT_MAX goes to
  // locus's own blocked loop on the host and to cuBLAS's 64-bit entry points on GPUs, never truncated.
  const std::size_t int_max = detail::blas_int_limit;
  [[maybe_unused]] const bool fits_int = m <= int_max && n <= int_max && k <= int_max && lda <= int_max &&
                                         ldb <= int_max && ldc <= int_max;
  if constexpr (runs_on_host<D>) {
#if defined(LOCUS_HAS_CBLAS) && LOCUS_HAS_CBLAS && !defined(LOCUS_NO_BLAS)
    if (!fits_int) {
      detail::blocked_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
    // The product in pieces on locus's pool, each one BLAS call on its thread (one thread budget
    // for both: no BLAS team spinning beside the pool's threads).
    detail::split_product(m, n, k, [&](std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) {
      constexpr int row_major = 101, no_trans = 111, trans = 112;
      [[maybe_unused]] const detail::blas_on_this_thread one;
      const T* ap = ta ? a + r0 : a + r0 * lda;  // rows r0.. of op(A)
      const T* bp = tb ? b + c0 * ldb : b + c0;  // columns c0.. of op(B)
      T* cp = c + r0 * ldc + c0;
      const int M = static_cast<int>(r1 - r0), N = static_cast<int>(c1 - c0), K = static_cast<int>(k);
      if constexpr (std::is_same_v<T, float>)
        cblas_sgemm(row_major, ta ? trans : no_trans, tb ? trans : no_trans, M, N, K, alpha, ap, static_cast<int>(lda),
                    bp, static_cast<int>(ldb), beta, cp, static_cast<int>(ldc));
      else
        cblas_dgemm(row_major, ta ? trans : no_trans, tb ? trans : no_trans, M, N, K, alpha, ap, static_cast<int>(lda),
                    bp, static_cast<int>(ldb), beta, cp, static_cast<int>(ldc));
    });
#else
    detail::blocked_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
  } else {
#if LOCUS_HAS_CUDA
    // cuBLAS is column-major: C^T = op(B)^T * op(A)^T, i.e. the operands swap places.
    cuda::device_guard guard(reg.physical_of(d.index), d);
    cublasHandle_t h = detail::cublas_handle(d);
    detail::check_cublas(cublasSetStream(h, reg.stream(d)), "cublasSetStream", d);
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if constexpr (std::is_same_v<T, float>) {
      if (tf32) {  // matmul(a, b, tf32): the TF32 tensor cores, float accumulation
        detail::check_cublas(
            cublasGemmEx_64(h, opb, opa, static_cast<std::int64_t>(n), static_cast<std::int64_t>(m),
                            static_cast<std::int64_t>(k), &alpha, b, CUDA_R_32F, static_cast<std::int64_t>(ldb), a,
                            CUDA_R_32F, static_cast<std::int64_t>(lda), &beta, c, CUDA_R_32F,
                            static_cast<std::int64_t>(ldc), CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx_64 (TF32)", d);
        return;
      }
    }
    if (!fits_int) {
      const auto M = static_cast<std::int64_t>(m), N = static_cast<std::int64_t>(n), K = static_cast<std::int64_t>(k);
      const auto la = static_cast<std::int64_t>(lda), lb = static_cast<std::int64_t>(ldb),
                 lc = static_cast<std::int64_t>(ldc);
      if constexpr (std::is_same_v<T, float>)
        detail::check_cublas(cublasSgemm_64(h, opb, opa, N, M, K, &alpha, b, lb, a, la, &beta, c, lc), "cublasSgemm_64", d);
      else
        detail::check_cublas(cublasDgemm_64(h, opb, opa, N, M, K, &alpha, b, lb, a, la, &beta, c, lc), "cublasDgemm_64", d);
      return;
    }
    const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
    if constexpr (std::is_same_v<T, float>)
      detail::check_cublas(cublasSgemm(h, opb, opa, N, M, K, &alpha, b, static_cast<int>(ldb), a, static_cast<int>(lda),
                                       &beta, c, static_cast<int>(ldc)), "cublasSgemm", d);
    else
      detail::check_cublas(cublasDgemm(h, opb, opa, N, M, K, &alpha, b, static_cast<int>(ldb), a, static_cast<int>(lda),
                                       &beta, c, static_cast<int>(ldc)), "cublasDgemm", d);
#endif
  }
}

/// Row-major C[m x n] = op(A) * op(B) (+ C when accumulate) for 16-bit A, B and C on a CUDA GPU:
/// cublasGemmEx on the tensor cores, float accumulation, rounded once into C. (Host-run devices
/// compute 16-bit products through float: ops/matmul.hpp.)
template <device D, class H>
void gemm_16bit([[maybe_unused]] bool ta, [[maybe_unused]] bool tb, [[maybe_unused]] std::size_t m,
                [[maybe_unused]] std::size_t n, [[maybe_unused]] std::size_t k, [[maybe_unused]] const H* a,
                [[maybe_unused]] std::size_t lda, [[maybe_unused]] const H* b, [[maybe_unused]] std::size_t ldb,
                [[maybe_unused]] bool accumulate, [[maybe_unused]] H* c, [[maybe_unused]] std::size_t ldc) {
  static_assert(is_half_float_v<H>, "locus: gemm_16bit takes bfloat16 or half");
  static_assert(!runs_on_host<D>, "locus: gemm_16bit is the CUDA path");
#if LOCUS_HAS_CUDA
  const device_id d = id_of<D>;
  auto& reg = registry::instance();
  reg.require(d);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // C = 0 (or C unchanged): cuBLAS refuses a row length of 0 for A
    if (!accumulate) for_each_index<D>(m * n, detail::scale_matrix_16<H>{c, n, ldc});
    return;
  }
  reg.counters(d).launches.fetch_add(1, std::memory_order_relaxed);
  cuda::device_guard guard(reg.physical_of(d.index), d);
  cublasHandle_t h = detail::cublas_handle(d);
  detail::check_cublas(cublasSetStream(h, reg.stream(d)), "cublasSetStream", d);
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  constexpr cudaDataType_t type = std::is_same_v<H, bfloat16> ? CUDA_R_16BF : CUDA_R_16F;
  const float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  // Column-major, as gemm above: C^T = op(B)^T * op(A)^T. The 64-bit entry point takes every size.
  detail::check_cublas(cublasGemmEx_64(h, opb, opa, static_cast<std::int64_t>(n), static_cast<std::int64_t>(m),
                                       static_cast<std::int64_t>(k), &alpha, b, type, static_cast<std::int64_t>(ldb),
                                       a, type, static_cast<std::int64_t>(lda), &beta, c, type,
                                       static_cast<std::int64_t>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx_64", d);
#endif
}

}  // namespace locus::backend
