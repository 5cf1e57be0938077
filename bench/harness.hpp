#pragma once
// A small benchmark harness: the median of repeated timings, each repetition long enough to be
// measured, printed side by side as a table with ratios. Benchmarks are not tests: they print.
#include <locus/backend/blas.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace locus_bench {

/// A BLAS floor measured at the BLAS's own best: a pthreads OpenBLAS, which locus sets to one
/// thread at its first product (its pieces run on locus's pool), gets `threads` threads while this
/// lives and one again after. Any other BLAS is left as it is.
class blas_threads {
public:
  explicit blas_threads(int threads) : set_(locus::backend::detail::pthreads_openblas_threads()) {
    if (set_ != nullptr) set_(threads);
  }
  ~blas_threads() {
    if (set_ != nullptr) set_(1);
  }
  blas_threads(const blas_threads&) = delete;
  blas_threads& operator=(const blas_threads&) = delete;

private:
  locus::backend::detail::openblas_threads_fn set_;
};

/// Median seconds per call of f(), over `reps` repetitions of enough calls to last ~min_seconds.
template <class F>
double time_per_call(F&& f, int reps = 11, double min_seconds = 0.02) {
  using clock = std::chrono::steady_clock;
  f();  // warm-up: page faults, caches, thread pools
  std::size_t calls = 1;
  for (;;) {
    const auto t0 = clock::now();
    for (std::size_t i = 0; i < calls; ++i) f();
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    if (s >= min_seconds || calls >= (std::size_t{1} << 24)) break;
    calls *= 2;
  }
  std::vector<double> samples;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = clock::now();
    for (std::size_t i = 0; i < calls; ++i) f();
    samples.push_back(std::chrono::duration<double>(clock::now() - t0).count() / double(calls));
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

inline void header(const std::string& title, const std::vector<std::string>& columns) {
  std::printf("\n%s\n|", title.c_str());
  for (const auto& c : columns) std::printf(" %s |", c.c_str());
  std::printf("\n|");
  for (std::size_t i = 0; i < columns.size(); ++i) std::printf(" --- |");
  std::printf("\n");
}

/// Keeps the compiler from discarding a result.
template <class T>
void keep(const T& value) {
  asm volatile("" : : "g"(&value) : "memory");
}

}  // namespace locus_bench
