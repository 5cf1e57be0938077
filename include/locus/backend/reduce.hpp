#pragma once
// One-pass reductions of a kernel k(i) on a device: the whole range, or the rows / columns of a
// rank-2 range. A reducer R says how: `acc lift(value, index)`, `acc combine(acc, acc)`,
// `acc identity()`, and `result finish(acc, count)`.
//
// Host devices (cpu, emulated GPUs): every thread of the budget reduces a contiguous part into
// independent accumulators (32 for sums, 16 otherwise: several vector registers busy instead of
// one add chain), then the parts are combined in order. CUDA: cub::DeviceReduce::Reduce over a transform iterator (one
// pass, no temporary copy of the input) and one tiny kernel for finish().
#include <locus/backend/memory.hpp>
#include <locus/backend/parallel.hpp>
#include <locus/backend/registry.hpp>
#include <locus/config.hpp>
#include <locus/device/device.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

#if LOCUS_HAS_CUDA
#  include <cub/device/device_reduce.cuh>
#  include <thrust/iterator/transform_iterator.h>
#endif

namespace locus::backend {

namespace detail {
template <class K, class R>
struct lift_fn {
  K kernel;
  R reducer;
  LOCUS_EXEC_CHECK_DISABLE
  LOCUS_HOST_DEVICE auto operator()(std::size_t i) const { return reducer.lift(kernel(i), i); }
};
template <class R>
struct combine_fn {
  R reducer;
  template <class A>
  LOCUS_HOST_DEVICE A operator()(const A& a, const A& b) const {
    return reducer.combine(a, b);
  }
};
template <class R, class Acc>
struct finish_fn {
  R reducer;
  const Acc* acc;
  std::size_t count;
  LOCUS_HOST_DEVICE auto operator()(std::size_t) const { return reducer.finish(acc[0], count); }
};

// A reducer may accumulate its lanes in a narrower type than its result (float lanes for a float
// sum, folded into a double every block): `lane`, `lane_identity()`, `lane_lift(v, i)`,
// `lane_combine(a, b)` and `fold(acc, lane)`. Without them the lanes are the accumulator.
template <class R>
concept has_lanes = requires { typename R::lane; };

template <class R>
struct lane_ops {
  const R& r;
  auto identity() const {
    if constexpr (has_lanes<R>) return r.lane_identity();
    else return r.identity();
  }
  template <class V>
  auto lift(V v, std::size_t i) const {
    if constexpr (has_lanes<R>) return r.lane_lift(v, i);
    else return r.lift(v, i);
  }
  template <class L>
  L combine(L a, L b) const {
    if constexpr (has_lanes<R>) return r.lane_combine(a, b);
    else return r.combine(a, b);
  }
  template <class A, class L>
  A fold(A acc, L lane) const {
    if constexpr (has_lanes<R>) return r.fold(acc, lane);
    else return r.combine(acc, lane);
  }
};

/// One block of a serial reduction with Lanes independent lanes, each its own sequential reduction,
/// folded pairwise at the end: several vector registers busy instead of one chain bound by the
/// operation's latency (a sum of 4096 floats 2-5x faster), and an order fixed by the block's bounds
/// alone (no reassociation is needed, so the bits do not depend on the vector width). Sums take 32
/// lanes, the others (max, min, argmax, ...) 16. No `omp simd`: an exception may not leave a simd
/// loop (GCC and clang call std::terminate), and a map() functor inside a reduction may throw.
template <std::size_t Lanes, class K, class R>
auto reduce_block(const K& k, const lane_ops<R>& ops, std::size_t b, std::size_t e) {
  using L = decltype(ops.identity());
  L a[Lanes];
  for (auto& x : a) x = ops.identity();
  std::size_t i = b;
  for (; e - i >= Lanes; i += Lanes)
    for (std::size_t j = 0; j < Lanes; ++j) a[j] = ops.combine(a[j], ops.lift(k(i + j), i + j));
  const std::size_t rest = e - i;  // < Lanes
  for (std::size_t j = 0; j < rest && j < Lanes; ++j) a[j] = ops.combine(a[j], ops.lift(k(i + j), i + j));
  for (std::size_t w = Lanes / 2; w > 0; w /= 2)
    for (std::size_t j = 0; j < w; ++j) a[j] = ops.combine(a[j], a[j + w]);
  return a[0];
}

/// Reduces k(first .. last-1) on the calling thread, block by block, each block folded into the
/// (wider) accumulator.
template <class K, class R>
auto serial_reduce(const K& kernel, const R& r, std::size_t first, std::size_t last) {
  constexpr std::size_t block = 2048;
  const K k = kernel;  // a local copy: its pointers stay in registers, nothing can alias them
  const lane_ops<R> ops{r};
  auto total = r.identity();
  for (std::size_t b = first; b < last; b += block) {
    const std::size_t e = std::min(last, b + block);
    constexpr std::size_t lanes = requires { R::additive; } ? 32 : 16;
    total = ops.fold(total, reduce_block<lanes>(k, ops, b, e));
  }
  return total;
}

template <class K, class R>
auto host_reduce(const K& k, const R& r, std::size_t n) {
  using Acc = decltype(r.identity());
  const std::size_t nt = n >= serial_threshold ? static_cast<std::size_t>(host_threads()) : 1;
  if (nt > 1) {
    // One part per thread of the budget, combined in order: the result depends on the thread
    // count only, never on which thread ran which part.
    std::vector<Acc> partial(nt, r.identity());
    const std::size_t chunk = (n + nt - 1) / nt;
    parallel_chunks(nt, [&](std::size_t t) {
      const std::size_t b = std::min(n, t * chunk), e = std::min(n, b + chunk);
      partial[t] = serial_reduce(k, r, b, e);
    });
    Acc total = r.identity();
    for (std::size_t t = 0; t < nt; ++t) total = r.combine(total, partial[t]);
    return total;
  }
  return serial_reduce(k, r, 0, n);
}
}  // namespace detail

/// out[0] = finish(reduction of k(0..n-1)), one pass on device D.
template <device D, class K, class R, class T>
void reduce(std::size_t n, const K& kernel, const R& reducer, T* out) {
  const device_id d = id_of<D>;
  auto& reg = registry::instance();
  reg.require(d);
  reg.counters(d).launches.fetch_add(1, std::memory_order_relaxed);
  if constexpr (runs_on_host<D>) {
    out[0] = static_cast<T>(reducer.finish(detail::host_reduce(kernel, reducer, n), n));
  } else {
#if LOCUS_HAS_CUDA
    using Acc = decltype(reducer.identity());
    cuda::device_guard guard(reg.physical_of(d.index), d);
    cudaStream_t s = reg.stream(d);
    auto in = thrust::make_transform_iterator(thrust::counting_iterator<std::size_t>(0),
                                              detail::lift_fn<K, R>{kernel, reducer});
    auto& arena = reg.arena(d);
    Acc* acc = static_cast<Acc*>(arena.allocate(sizeof(Acc)));
    std::size_t temp_bytes = 0;
    LOCUS_CUDA_CHECK(cub::DeviceReduce::Reduce(nullptr, temp_bytes, in, acc, n, detail::combine_fn<R>{reducer},
                                               reducer.identity(), s), d);
    void* temp = arena.allocate(std::max<std::size_t>(temp_bytes, 1));
    const cudaError_t e = cub::DeviceReduce::Reduce(temp, temp_bytes, in, acc, n, detail::combine_fn<R>{reducer},
                                                     reducer.identity(), s);
    arena.deallocate(temp);  // stream-ordered reuse: the next user of the block runs after this kernel
    if (e != cudaSuccess) arena.deallocate(acc);
    LOCUS_CUDA_CHECK(e, d);
    transform<D>(1, detail::finish_fn<R, Acc>{reducer, acc, n}, out);
    arena.deallocate(acc);
#endif
  }
}

namespace detail {
/// Reduces the rows (axis 1) or the columns (axis 0) of a rows x cols range, one output each.
template <int Axis, class K, class R>
struct axis_reduce_fn {
  K kernel;
  R reducer;
  std::size_t rows, cols;
  LOCUS_EXEC_CHECK_DISABLE
  LOCUS_HOST_DEVICE auto operator()(std::size_t o) const {
    auto a = reducer.identity();
    if constexpr (Axis == 1) {
      for (std::size_t c = 0; c < cols; ++c) a = reducer.combine(a, reducer.lift(kernel(o * cols + c), c));
      return reducer.finish(a, cols);
    } else {
      for (std::size_t r = 0; r < rows; ++r) a = reducer.combine(a, reducer.lift(kernel(r * cols + o), r));
      return reducer.finish(a, rows);
    }
  }
};
}  // namespace detail

/// out[o] = finish(reduction over axis Axis of the rows x cols range k), one kernel on device D.
/// Axis 1: one output per row; axis 0: one output per column.
template <device D, int Axis, class K, class R, class T>
void reduce_axis(std::size_t rows, std::size_t cols, const K& kernel, const R& reducer, T* out) {
  static_assert(Axis == 0 || Axis == 1, "locus: a rank-2 reduction runs along axis 0 or 1");
  const std::size_t outputs = Axis == 1 ? rows : cols;
  if constexpr (runs_on_host<D>) {
    registry::instance().require(id_of<D>);
    registry::instance().counters(id_of<D>).launches.fetch_add(1, std::memory_order_relaxed);
  }
  if constexpr (runs_on_host<D> && Axis == 1) {
    // Rows are contiguous: each one gets the 16-accumulator loop.
    const auto row = [&](std::size_t r) {
      out[r] = static_cast<T>(reducer.finish(
          detail::serial_reduce([&](std::size_t c) { return kernel(r * cols + c); }, reducer, 0, cols), cols));
    };
    if (rows > 1 && rows * cols >= serial_threshold) {
      parallel_ranges(rows, [&](std::size_t b, std::size_t e) {
        for (std::size_t r = b; r < e; ++r) row(r);
      }, std::max<std::size_t>(1, serial_threshold / std::max<std::size_t>(cols, 1)));
    } else {
      for (std::size_t r = 0; r < rows; ++r) row(r);
    }
  } else if constexpr (runs_on_host<D>) {
    // Columns are strided: whole rows are folded into one accumulator per column (contiguous reads,
    // a vector loop; the same order of operations as a column walk), blocks of columns in parallel.
    using Acc = decltype(reducer.identity());
    constexpr std::size_t block = 64;
    const std::size_t blocks = (cols + block - 1) / block;
    const K k = kernel;  // a local copy: its pointers stay in registers
    const auto column_block = [&](std::size_t b) {
      const std::size_t c0 = b * block, width = std::min(block, cols - c0);
      Acc acc[block];
      for (std::size_t c = 0; c < width; ++c) acc[c] = reducer.identity();
      for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t base = r * cols + c0;
        for (std::size_t c = 0; c < width; ++c) acc[c] = reducer.combine(acc[c], reducer.lift(k(base + c), r));
      }
      for (std::size_t c = 0; c < width; ++c) out[c0 + c] = static_cast<T>(reducer.finish(acc[c], rows));
    };
    if (blocks > 1 && rows * cols >= serial_threshold) {
      parallel_chunks(blocks, column_block);
    } else {
      for (std::size_t b = 0; b < blocks; ++b) column_block(b);
    }
  } else {
    transform<D>(outputs, detail::axis_reduce_fn<Axis, K, R>{kernel, reducer, rows, cols}, out);
  }
}

}  // namespace locus::backend
