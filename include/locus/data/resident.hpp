#pragma once
// A training set kept in a GPU's memory for the length of a fit: its rows, labels and targets
// uploaded once, each epoch's order uploaded once (when the epoch starts), and every batch gathered
// by kernels on the device. A step then copies nothing from the host and waits for nothing: the
// host path (data::gather) builds each batch on the host and copies it, a wait on the GPU per
// tensor and step.
//
//   data::resident<any_gpu> rows(train_set);       // inside the GPU's device scope
//   auto [x, y] = rows.gather(order, first, 128);  // two kernels on the GPU
//
// data_parallel's fit keeps the set on each GPU replica when its bytes are at most
// fit_options::data_on_device_limit (4 GiB by default; larger sets take the host path: they are not
// streamed through pinned buffers). Host-run devices (the cpu, emulated GPUs) read the host's rows
// in place either way, unless a test asks for the device path (detail::resident_on_host_run_devices).
// The copy is the set as it was when the fit started: a set whose tensors are replaced during the
// fit is noticed (holds() compares them) and read on the host, but rows rewritten in place (an
// on_epoch that augments them) are not seen; fit one epoch at a time to change them, or set the
// limit to 0.
#include <locus/backend/parallel.hpp>
#include <locus/config.hpp>
#include <locus/data/idx.hpp>
#include <locus/data/sampler.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/tensor/transfer.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace locus::data {

namespace detail {
/// Tests set it: emulated GPUs (and the cpu) keep a resident copy too, so CI runs the device path.
inline bool resident_on_host_run_devices = false;

/// x[r, c] = rows[order[first + r], c].
struct gather_rows_kernel {
  const float* rows;
  const std::int32_t* order;
  std::size_t first, cols;
  LOCUS_HOST_DEVICE float operator()(std::size_t i) const {
    return rows[std::size_t(order[first + i / cols]) * cols + i % cols];
  }
};
/// y[r] = labels[order[first + r]].
struct gather_labels_kernel {
  const std::int32_t* labels;
  const std::int32_t* order;
  std::size_t first;
  LOCUS_HOST_DEVICE std::int32_t operator()(std::size_t r) const { return labels[std::size_t(order[first + r])]; }
};
}  // namespace detail

/// The bytes a data set's rows, labels and targets take.
[[nodiscard]] inline std::size_t bytes_of(const labelled_images& data) {
  return data.images.size() * sizeof(float) + data.labels.size() * sizeof(std::int32_t) +
         data.targets.size() * sizeof(float);
}

/// Whether a fit keeps `data` on device D under a limit of `limit` bytes: D a CUDA GPU (or any
/// device, for tests), the set within the limit, its rows countable by an int32 order.
template <device D>
[[nodiscard]] bool keeps_resident(const labelled_images& data, std::size_t limit) {
  if (backend::runs_on_host<D> && !detail::resident_on_host_run_devices) return false;
  return limit != 0 && bytes_of(data) <= limit &&
         data.size() <= std::size_t(std::numeric_limits<std::int32_t>::max());
}

/// A data set's rows on device D (see the top of this file). Empty (default-made): holds nothing.
template <device D>
class resident {
public:
  resident() = default;
  /// Uploads `data` (one copy per tensor). The set must outlive this object's use of it only for
  /// holds(): the rows themselves are copied.
  explicit resident(const labelled_images& data)
      : source_(countable(data)), source_images_(data.images.data()), source_labels_(data.labels.data()),
        source_targets_(data.targets.data()), cols_(data.images.extent(1)),
        k_(data.has_targets() ? data.targets.extent(1) : 0), images_(to<D>(data.images)), labels_(to<D>(data.labels)),
        targets_(to<D>(data.targets)) {}

  /// True when this object holds `data`: the object it was made from, with the same tensors (a
  /// set whose tensors were replaced since is not held: it is read on the host).
  [[nodiscard]] bool holds(const labelled_images& data) const noexcept {
    return source_ == &data && data.images.data() == source_images_ && data.labels.data() == source_labels_ &&
           data.targets.data() == source_targets_ && data.size() == source_rows() &&
           data.images.extent(1) == cols_ && (data.has_targets() ? data.targets.extent(1) : 0) == k_;
  }

  /// The rows order[first .. first + count) on D, their labels and targets: one kernel per tensor.
  /// `order` (every row once or not: any rows of the set) is uploaded when the entries this batch
  /// uses differ from those of the order held (in a fit: once an epoch); checked then.
  [[nodiscard]] std::pair<tensor<float, D, 2>, targets<D>> gather(const std::vector<std::uint32_t>& order,
                                                                  std::size_t first, std::size_t count) {
    if (source_ == nullptr) throw config_error("locus: data::resident::gather: this object holds no data set");
    if (order.size() != source_rows() || first > order.size() || count > order.size() - first)
      throw shape_error("locus: data::resident::gather: rows [" + std::to_string(first) + ", " +
                        std::to_string(first) + " + " + std::to_string(count) + ") of an order of " +
                        std::to_string(order.size()) + " over " + std::to_string(source_rows()) + " rows");
    const auto used = order.begin() + std::ptrdiff_t(first);
    if (held_.size() != order.size() || !std::equal(used, used + std::ptrdiff_t(count), held_.begin() + std::ptrdiff_t(first))) {
      std::vector<std::int32_t> narrow(order.size());
      for (std::size_t i = 0; i < order.size(); ++i) {
        if (order[i] >= source_rows())
          throw shape_error("locus: data::resident::gather: order[" + std::to_string(i) + "] = " +
                            std::to_string(order[i]) + " past the " + std::to_string(source_rows()) + " rows");
        narrow[i] = std::int32_t(order[i]);
      }
      order_ = tensor<std::int32_t, D>(shape{narrow.size()}, narrow);
      held_ = order;
      ++uploads_;
    }
    auto x = tensor<float, D, 2>::uninitialized_of(shape{count, cols_});
    backend::transform<D>(count * cols_, detail::gather_rows_kernel{images_.data(), order_.data(), first, cols_}, x.data());
    targets<D> y;
    if (labels_.size() != 0) {
      y.labels = tensor<std::int32_t, D>::uninitialized_of(shape{count});
      backend::transform<D>(count, detail::gather_labels_kernel{labels_.data(), order_.data(), first}, y.labels.data());
    }
    if (k_ != 0) {
      y.values = tensor<float, D, 2>::uninitialized_of(shape{count, k_});
      backend::transform<D>(count * k_, detail::gather_rows_kernel{targets_.data(), order_.data(), first, k_},
                            y.values.data());
    }
    return {std::move(x), std::move(y)};
  }

  /// The orders uploaded so far (in a fit: one an epoch).
  [[nodiscard]] std::size_t order_uploads() const noexcept { return uploads_; }

private:
  [[nodiscard]] std::size_t source_rows() const noexcept { return images_.extent(0); }
  /// &data, after its rows are found countable by an int32 order (before anything is uploaded).
  static const labelled_images* countable(const labelled_images& data) {
    if (data.size() > std::size_t(std::numeric_limits<std::int32_t>::max()))
      throw data_error("locus: data::resident: " + std::to_string(data.size()) +
                       " rows (a resident set's order counts rows in int32: at most 2^31 - 1)");
    return &data;
  }

  const labelled_images* source_ = nullptr;
  const float* source_images_ = nullptr;
  const std::int32_t* source_labels_ = nullptr;
  const float* source_targets_ = nullptr;
  std::size_t cols_ = 0, k_ = 0;
  tensor<float, D, 2> images_;
  tensor<std::int32_t, D> labels_;
  tensor<float, D, 2> targets_;
  tensor<std::int32_t, D> order_;
  std::vector<std::uint32_t> held_;  // the order on the device, as the host gave it
  std::size_t uploads_ = 0;
};

/// A batch for a replica on D: from `rows` when it holds `data`, else gathered on the host
/// (data::gather).
template <device D>
[[nodiscard]] std::pair<tensor<float, D, 2>, targets<D>> batch_of(resident<D>* rows, const labelled_images& data,
                                                                  const std::vector<std::uint32_t>& order,
                                                                  std::size_t first, std::size_t count) {
  if (rows != nullptr && rows->holds(data)) return rows->gather(order, first, count);
  return gather<D>(data, order, first, count);
}

}  // namespace locus::data
