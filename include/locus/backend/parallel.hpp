#pragma once
// The one way locus runs elementwise work: out[i] = kernel(i) for i in [0, n), as ONE parallel loop
// or ONE CUDA kernel on the device's stream. Host devices (cpu and emulated GPUs) go through locus's
// host pool (pool.hpp: pieces claimed by the threads of the process's budget, the caller one of
// them), below `serial_threshold` elements as a plain loop on the calling thread.
#include <locus/backend/pool.hpp>
#include <locus/backend/registry.hpp>
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/tensor/half.hpp>

#include <cstddef>

#include <thrust/iterator/counting_iterator.h>
#include <thrust/system/cpp/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/transform.h>
#if defined(_OPENMP)
#  include <omp.h>
#  include <thrust/system/omp/execution_policy.h>
#endif
#if LOCUS_HAS_CUDA
#  include <cub/device/device_transform.cuh>
#  include <cuda/std/tuple>
#  include <thrust/system/cuda/execution_policy.h>
#  include <thrust/system_error.h>
#endif
#include <tuple>

namespace locus::backend {

/// The Thrust system a device's work runs on.
#if defined(_OPENMP)
using host_system = thrust::system::omp::tag;
#else
using host_system = thrust::system::cpp::tag;
#endif
template <device D>
struct thrust_system {
  using type = host_system;
};
#if LOCUS_HAS_CUDA
template <int N>
struct thrust_system<gpu<N>> {
  using type = thrust::system::cuda::tag;
};
template <>
struct thrust_system<any_gpu> {
  using type = thrust::system::cuda::tag;
};
#endif
template <device D>
using thrust_system_t = typename thrust_system<D>::type;

/// True when D's kernels run on the host (cpu, and GPUs in an emulated build).
template <device D>
inline constexpr bool runs_on_host = D::kind == device_kind::cpu || !LOCUS_HAS_CUDA;

namespace detail {
template <class K, class T>
struct store_as {
  K kernel;
  LOCUS_EXEC_CHECK_DISABLE
  LOCUS_HOST_DEVICE T operator()(std::size_t i) const { return static_cast<T>(kernel(i)); }
};

/// One tile of a rank-2 transform, a row or a piece of one (`span` columns at most):
/// out[r * cols + c] = kernel(r * cols + c, r, c).
template <class K, class T>
struct row_tile {
  K kernel;
  T* out;
  std::size_t cols, span, tiles_per_row;
  LOCUS_EXEC_CHECK_DISABLE
  LOCUS_HOST_DEVICE void operator()(std::size_t t) const {
    const std::size_t r = t / tiles_per_row, c0 = (t % tiles_per_row) * span;
    const std::size_t c1 = c0 + span < cols ? c0 + span : cols, base = r * cols;
    for (std::size_t c = c0; c < c1; ++c) out[base + c] = static_cast<T>(kernel(base + c, r, c));
  }
};

// Host loops that store bfloat16 or half values: their conversions are integer work (widening a
// shift, rounding to nearest even a few adds and masks) that the baseline x86-64 instruction set
// (SSE2, what a build without -march targets) runs 4 lanes at a time. GCC builds compile these
// loops for AVX2 and AVX-512 too and take the CPU's at run time (detected once); contraction into
// FMAs stays off in them, so every version stores the baseline's bits.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__)
#  define LOCUS_DETAIL_HOST_MULTIVERSION 1
#else
#  define LOCUS_DETAIL_HOST_MULTIVERSION 0
#endif

enum class host_isa { baseline, avx2, avx512 };

/// The widest of the host's instruction sets that 16-bit loops are compiled for.
inline host_isa detected_host_isa() noexcept {
#if LOCUS_DETAIL_HOST_MULTIVERSION
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return host_isa::avx512;
  if (__builtin_cpu_supports("avx2")) return host_isa::avx2;
#endif
  return host_isa::baseline;
}
/// The instruction set host loops storing 16-bit values run with (tests set baseline to compare).
inline host_isa sixteen_bit_isa = detected_host_isa();

/// f(i) for i in [b, e), f copied first (its pointers stay in registers).
template <class F>
void run_range(const F& f, std::size_t b, std::size_t e) {
  const F k = f;
  for (std::size_t i = b; i < e; ++i) k(i);
}
#if LOCUS_DETAIL_HOST_MULTIVERSION
template <class F>
[[gnu::target("avx2"), gnu::optimize("fp-contract=off")]] void run_range_avx2(const F& f, std::size_t b, std::size_t e) {
  const F k = f;
  for (std::size_t i = b; i < e; ++i) k(i);
}
template <class F>
[[gnu::target("avx512f,avx512bw,avx512vl"), gnu::optimize("fp-contract=off")]] void run_range_avx512(const F& f,
                                                                                                     std::size_t b,
                                                                                                     std::size_t e) {
  const F k = f;
  for (std::size_t i = b; i < e; ++i) k(i);
}
#endif
/// run_range, in the version for sixteen_bit_isa when Wide (a loop storing 16-bit values).
template <bool Wide, class F>
void run_range_as(const F& f, std::size_t b, std::size_t e) {
#if LOCUS_DETAIL_HOST_MULTIVERSION
  if constexpr (Wide) {
    switch (sixteen_bit_isa) {
      case host_isa::avx512: run_range_avx512(f, b, e); return;
      case host_isa::avx2: run_range_avx2(f, b, e); return;
      case host_isa::baseline: break;
    }
  }
#endif
  run_range(f, b, e);
}

/// out[i] = kernel(i) as a callable of i.
template <class K, class T>
struct store_into {
  K kernel;
  T* out;
  void operator()(std::size_t i) const { out[i] = kernel(i); }
};

/// f(i) for i in [0, n) on the host: pieces on the host pool when `parallel`, else a plain loop
/// (Wide: a loop storing 16-bit values, run_range_as).
template <class F, bool Wide = false>
void host_for_each(std::size_t n, const F& f, bool parallel) {
  if (parallel) {
    parallel_ranges(n, [&f](std::size_t b, std::size_t e) { run_range_as<Wide>(f, b, e); });
    return;
  }
  run_range_as<Wide>(f, 0, n);
}

template <class T>
struct constant {
  T value;
  LOCUS_HOST_DEVICE T operator()(std::size_t) const { return value; }
};

/// out = f(values of the inputs at one index), converted to the output's type.
template <class F, class T>
struct store_values {
  F f;
  LOCUS_EXEC_CHECK_DISABLE
  template <class... V>
  LOCUS_HOST_DEVICE T operator()(V... v) const {
    return static_cast<T>(f(v...));
  }
};

/// For measurements: GPUs evaluate every expression by index (the launcher before
/// transform_inputs), as bench_gpu does to compare the two.
inline bool prefer_index_kernels = false;
}  // namespace detail

/// out[i] = kernel(i), i in [0, n), on device D.
template <device D, class K, class T>
void transform(std::size_t n, const K& kernel, T* out) {
  const device_id d = id_of<D>;
  auto& reg = registry::instance();
  reg.require(d);
  if (n == 0) return;
  reg.counters(d).launches.fetch_add(1, std::memory_order_relaxed);
  const detail::store_as<K, T> f{kernel};
  if constexpr (runs_on_host<D>) {
    detail::host_for_each<detail::store_into<detail::store_as<K, T>, T>, is_half_float_v<T>>(
        n, detail::store_into<detail::store_as<K, T>, T>{f, out}, n >= serial_threshold);
  } else {
#if LOCUS_HAS_CUDA
    cuda::device_guard guard(reg.physical_of(d.index), d);
    try {
      thrust::transform(thrust::cuda::par_nosync.on(reg.stream(d)), thrust::counting_iterator<std::size_t>(0),
                        thrust::counting_iterator<std::size_t>(n), out, f);
    } catch (const thrust::system_error& e) {
      throw cuda_error("thrust::transform", d.full_name(), e.code().value(), e.what());
    }
#endif
  }
}

/// out[i] = f(in_0[i], in_1[i], ...), i in [0, n), on GPU D: one cub::DeviceTransform with the
/// inputs as raw pointers, so that CUB's bulk-copy and prefetching loads apply (expr/direct.hpp).
template <device D, class F, class T, class... Ps>
void transform_inputs([[maybe_unused]] std::size_t n, [[maybe_unused]] const std::tuple<const Ps*...>& inputs,
                      [[maybe_unused]] const F& f, [[maybe_unused]] T* out) {
  static_assert(!runs_on_host<D>, "locus: transform_inputs is the GPU launcher; the host runs kernels by index");
#if LOCUS_HAS_CUDA
  const device_id d = id_of<D>;
  auto& reg = registry::instance();
  reg.require(d);
  if (n == 0) return;
  reg.counters(d).launches.fetch_add(1, std::memory_order_relaxed);
  cuda::device_guard guard(reg.physical_of(d.index), d);
  auto in = std::apply([](const Ps*... p) { return ::cuda::std::make_tuple(p...); }, inputs);
  LOCUS_CUDA_CHECK(cub::DeviceTransform::Transform(in, out, n, detail::store_values<F, T>{f}, reg.stream(d)), d);
#endif
}

/// out[i] = kernel(i) over a rows x cols range, i = r * cols + c. On the host the loop runs over
/// rows (long rows in pieces of 4096 columns, so a [1, n] range is parallel too) and calls
/// kernel(i, r, c): kernels that broadcast a row or a column index it directly, one vector loop per
/// piece, no division per element. A GPU runs the flat transform.
template <device D, class K, class T>
void transform_rows(std::size_t rows, std::size_t cols, const K& kernel, T* out) {
  if constexpr (runs_on_host<D>) {
    const device_id d = id_of<D>;
    auto& reg = registry::instance();
    reg.require(d);
    if (rows == 0 || cols == 0) return;
    reg.counters(d).launches.fetch_add(1, std::memory_order_relaxed);
    constexpr std::size_t span = 4096;
    const std::size_t per_row = (cols + span - 1) / span;
    const detail::row_tile<K, T> f{kernel, out, cols, span, per_row};
    const std::size_t tiles = rows * per_row;
    detail::host_for_each<detail::row_tile<K, T>, is_half_float_v<T>>(tiles, f, tiles > 1 && rows * cols >= serial_threshold);
  } else {
    transform<D>(rows * cols, kernel, out);
  }
}

/// f(i) for i in [0, n), on device D: a kernel with several outputs (f writes through pointers it
/// holds). f must be trivially copyable and, for GPUs, callable on the device. `work_each`: about how
/// many elements one f(i) touches (a plane, a row), for the host's choice between a plain loop and
/// the pool: it runs in parallel when n * work_each reaches serial_threshold.
template <device D, class F>
void for_each_index(std::size_t n, const F& f, [[maybe_unused]] std::size_t work_each = 1) {
  const device_id d = id_of<D>;
  auto& reg = registry::instance();
  reg.require(d);
  if (n == 0) return;
  reg.counters(d).launches.fetch_add(1, std::memory_order_relaxed);
  if constexpr (runs_on_host<D>) {
    detail::host_for_each(n, f, n > 1 && double(n) * double(work_each) >= double(serial_threshold));
  } else {
#if LOCUS_HAS_CUDA
    cuda::device_guard guard(reg.physical_of(d.index), d);
    try {
      thrust::for_each(thrust::cuda::par_nosync.on(reg.stream(d)), thrust::counting_iterator<std::size_t>(0),
                       thrust::counting_iterator<std::size_t>(n), f);
    } catch (const thrust::system_error& e) {
      throw cuda_error("thrust::for_each", d.full_name(), e.code().value(), e.what());
    }
#endif
  }
}

/// out[i] = value, i in [0, n), on device D.
template <device D, class T>
void fill(std::size_t n, T value, T* out) {
  transform<D>(n, detail::constant<T>{value}, out);
}

}  // namespace locus::backend
