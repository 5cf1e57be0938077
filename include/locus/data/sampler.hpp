#pragma once
// Batches for training: a seeded shuffle of a data set's rows per epoch, the shard of a batch that
// one replica takes, and the gather of those rows into tensors on a device.
#include <locus/config.hpp>
#include <locus/backend/omp.hpp>
#include <locus/backend/parallel.hpp>
#include <locus/data/idx.hpp>
#include <locus/device/device.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/tensor/transfer.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

namespace locus::data {

/// The rows 0..n-1 in the order of epoch `epoch` of a run seeded with `seed` (the same on every
/// rank and replica: each takes its own part of it).
inline std::vector<std::uint32_t> shuffled(std::size_t n, std::uint64_t seed, std::size_t epoch) {
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::mt19937_64 gen(seed * 7919 + epoch);
  std::shuffle(order.begin(), order.end(), gen);
  return order;
}

/// Where replica `replica` of `replicas` finds its shard of the batch that starts at `first`:
/// batches split into equal consecutive parts, replica r taking part r.
struct shard {
  std::size_t first = 0;  ///< the shard's first position in the epoch's order
  std::size_t count = 0;  ///< its rows
};
[[nodiscard]] inline shard shard_of(std::size_t batch_first, std::size_t batch, std::size_t replica,
                                    std::size_t replicas) {
  const std::size_t part = batch / replicas;
  return {batch_first + replica * part, part};
}

/// A batch's targets on device D: its rows' int32 labels (a classifier's) or their float targets
/// [rows, k] (a model trained on float targets), as the data set holds them; the other is empty.
/// A labels tensor converts to one (a policy or test that hands a replica labels of its own).
template <device D>
struct targets {
  tensor<std::int32_t, D> labels;
  tensor<float, D, 2> values;
  targets() = default;
  targets(tensor<std::int32_t, D> l) : labels(std::move(l)) {}  // NOLINT(google-explicit-constructor)
  targets(tensor<float, D, 2> v) : values(std::move(v)) {}      // NOLINT(google-explicit-constructor)
  targets(tensor<std::int32_t, D> l, tensor<float, D, 2> v) : labels(std::move(l)), values(std::move(v)) {}
};

/// The rows `order[first .. first+count)` of a data set, on device D: their features and their
/// targets (labels, float targets, or both where the data set has both). Gathered into tensors
/// from the caching arena (no allocation per step): written in place on host-run devices, copied
/// to GPUs.
template <device D>
std::pair<tensor<float, D, 2>, targets<D>> gather(const labelled_images& data, const std::vector<std::uint32_t>& order,
                                                  std::size_t first, std::size_t count) {
  const std::size_t cols = data.images.extent(1);
  const bool with_labels = data.labels.size() != 0, with_values = data.has_targets();
  const std::size_t k = with_values ? data.targets.extent(1) : 0;
  // Devices whose memory the host reads and writes (the cpu, emulated GPUs) get the rows directly.
  using H = std::conditional_t<backend::runs_on_host<D>, D, cpu>;
  auto x = tensor<float, H, 2>::uninitialized_of(shape{count, cols});
  auto y = with_labels ? tensor<std::int32_t, H>::uninitialized_of(shape{count}) : tensor<std::int32_t, H>();
  auto t = with_values ? tensor<float, H, 2>::uninitialized_of(shape{count, k}) : tensor<float, H, 2>();
  const float* src = data.images.data();
  float* dst = x.data();
  std::int32_t* labels = y.data();
  const std::int32_t* all_labels = data.labels.data();
  float* values = t.data();
  const float* all_values = data.targets.data();
  // Rows at random places in a large array: the copy waits on memory, so the host's threads copy
  // rows side by side, each asking for a later row's first lines ahead of time.
  constexpr std::size_t ahead = 4;
  const auto copy_rows = [&](std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      if (r + ahead < r1) {
        [[maybe_unused]] const float* next = src + std::size_t(order[first + r + ahead]) * cols;
#if defined(__GNUC__) || defined(__clang__)
        for (std::size_t line = 0; line < 4; ++line) __builtin_prefetch(next + line * 16);
#endif
      }
      const std::size_t row = order[first + r];
      std::copy(src + row * cols, src + (row + 1) * cols, dst + r * cols);
      if (with_labels) labels[r] = all_labels[row];
      if (with_values) std::copy(all_values + row * k, all_values + (row + 1) * k, values + r * k);
    }
  };
  if (count * cols >= backend::serial_threshold)
    backend::parallel_ranges(count, copy_rows, std::max<std::size_t>(1, backend::serial_threshold / std::max<std::size_t>(cols, 1)));
  else
    copy_rows(0, count);
  if constexpr (std::is_same_v<H, D>) {
    return {std::move(x), targets<D>(std::move(y), std::move(t))};
  } else {
    return {locus::to<D>(x), targets<D>(with_labels ? locus::to<D>(y) : tensor<std::int32_t, D>(),
                                        with_values ? locus::to<D>(t) : tensor<float, D, 2>())};
  }
}

}  // namespace locus::data
