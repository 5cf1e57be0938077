#pragma once
// Data sets from the program's own arrays (issue 30): rows of float features with a class label
// each, or with float targets each (regression), checked once where they are made, and a seeded
// split into a training and a validation part. A dataset is what the trainers' fit, accuracy and predict take; the IDX loaders
// (data/idx.hpp) return one.
#include <locus/config.hpp>
#include <locus/data/idx.hpp>
#include <locus/errors.hpp>
#include <locus/tensor/tensor.hpp>

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace locus::data {

/// Rows of float features ([rows, row_size], on the cpu) and one int32 class label per row.
/// labelled_images is its first name (the IDX loaders' images are rows of pixels in [0, 1]).
using dataset = labelled_images;

/// A dataset from host arrays: `features` holds `row_size` floats per row, row after row
/// (row-major [rows, row_size]), `labels` one class per row. With `classes` > 0 every label must
/// lie in [0, classes). Throws data_error naming what is wrong, and where, before anything is made:
/// no rows, a row size of 0, a feature count that is not a whole number of rows, label and row
/// counts that differ, a NaN or infinite feature (its row and column), a negative label or one
/// outside [0, classes) (its row).
LOCUS_RUNTIME_INLINE dataset make_dataset(std::span<const float> features, std::size_t row_size,
                                          std::span<const std::int32_t> labels, std::size_t classes = 0);
/// The same from cpu tensors: features [rows, row_size], labels [rows] (copied).
LOCUS_RUNTIME_INLINE dataset make_dataset(const tensor<float, cpu, 2>& features, const tensor<std::int32_t, cpu>& labels,
                                          std::size_t classes = 0);

/// A dataset of float targets (regression) from host arrays: `features` holds `row_size` floats per
/// row and `targets` `target_size` floats per row, row after row. Throws data_error naming what is
/// wrong, and where, before anything is made: no rows, a row or target size of 0, a count that is
/// not a whole number of rows, row counts that differ, a NaN or infinite feature or target (its row
/// and column).
LOCUS_RUNTIME_INLINE dataset make_dataset(std::span<const float> features, std::size_t row_size,
                                          std::span<const float> targets, std::size_t target_size);
/// The same from cpu tensors: features [rows, row_size], targets [rows, target_size] (copied).
LOCUS_RUNTIME_INLINE dataset make_dataset(const tensor<float, cpu, 2>& features, const tensor<float, cpu, 2>& targets);

namespace detail {
/// Throws data_error "<where><what> <column> of row <row> is NaN|infinite" at the first value of
/// `values` (rows of `width`) that is not finite.
LOCUS_RUNTIME_INLINE void check_finite(const std::string& where, std::span<const float> values, std::size_t width,
                                       const char* what);
}  // namespace detail

/// The two parts of a split.
struct split_parts {
  dataset train;
  dataset validation;
};

/// Splits d at random into a validation part of round(validation_fraction x rows) rows and a
/// training part of the rest; each part keeps d's row order. The choice depends on `seed` alone:
/// the same parts on every platform and standard library. Throws config_error when the fraction
/// is not in (0, 1) (NaN included) or leaves a part empty, data_error when d's features and labels
/// (or float targets) disagree on the row count. Labels and float targets go with their rows.
LOCUS_RUNTIME_INLINE split_parts split(const dataset& d, double validation_fraction, std::uint64_t seed);

// Part of the run-time (config.hpp, LOCUS_SEPARATE_RUNTIME).
#if LOCUS_RUNTIME_DEFINITIONS
namespace detail {
/// x as the shortest text that reads back as x (std::to_string prints 1e-300 as 0.000000).
LOCUS_RUNTIME_INLINE std::string shortest(double x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

/// splitmix64: the split's generator, defined here so that no standard library's shuffle decides it.
LOCUS_RUNTIME_INLINE std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

LOCUS_RUNTIME_INLINE void check_finite(const std::string& where, std::span<const float> values, std::size_t width,
                                       const char* what) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i]))
      throw data_error(where + what + " " + std::to_string(i % width) + " of row " + std::to_string(i / width) +
                       " is " + (std::isnan(values[i]) ? "NaN" : "infinite"));
}
}  // namespace detail

LOCUS_RUNTIME_INLINE dataset make_dataset(std::span<const float> features, std::size_t row_size,
                                          std::span<const std::int32_t> labels, std::size_t classes) {
  const std::string where = "locus: make_dataset: ";
  if (row_size == 0) throw data_error(where + "a row size of 0 (each row needs at least one feature)");
  if (labels.empty()) throw data_error(where + "no rows (0 labels): a dataset needs at least one row");
  if (features.size() % row_size != 0)
    throw data_error(where + std::to_string(features.size()) + " features are not a whole number of rows of " +
                     std::to_string(row_size));
  const std::size_t rows = features.size() / row_size;
  if (rows != labels.size())
    throw data_error(where + std::to_string(rows) + " rows of " + std::to_string(row_size) + " features but " +
                     std::to_string(labels.size()) + " labels");
  detail::check_finite(where, features, row_size, "feature");
  for (std::size_t i = 0; i < rows; ++i)
    if (labels[i] < 0 || (classes > 0 && static_cast<std::size_t>(labels[i]) >= classes))
      throw data_error(where + "label " + std::to_string(labels[i]) + " of row " + std::to_string(i) +
                       (classes > 0 ? " is outside [0, " + std::to_string(classes) + ")" : " is negative"));
  return dataset{tensor<float, cpu, 2>(shape<2>{rows, row_size}, features),
                 tensor<std::int32_t, cpu>(shape<1>{rows}, labels)};
}

LOCUS_RUNTIME_INLINE dataset make_dataset(const tensor<float, cpu, 2>& features, const tensor<std::int32_t, cpu>& labels,
                                          std::size_t classes) {
  if (features.extent(0) != labels.size())
    throw data_error("locus: make_dataset: " + std::to_string(features.extent(0)) + " rows of features but " +
                     std::to_string(labels.size()) + " labels");
  return make_dataset(std::span<const float>(features.data(), features.size()), features.extent(1),
                      std::span<const std::int32_t>(labels.data(), labels.size()), classes);
}

LOCUS_RUNTIME_INLINE dataset make_dataset(std::span<const float> features, std::size_t row_size,
                                          std::span<const float> targets, std::size_t target_size) {
  const std::string where = "locus: make_dataset: ";
  if (row_size == 0) throw data_error(where + "a row size of 0 (each row needs at least one feature)");
  if (target_size == 0) throw data_error(where + "a target size of 0 (each row needs at least one target)");
  if (features.empty()) throw data_error(where + "no rows (0 features): a dataset needs at least one row");
  if (features.size() % row_size != 0)
    throw data_error(where + std::to_string(features.size()) + " features are not a whole number of rows of " +
                     std::to_string(row_size));
  if (targets.size() % target_size != 0)
    throw data_error(where + std::to_string(targets.size()) + " targets are not a whole number of rows of " +
                     std::to_string(target_size));
  const std::size_t rows = features.size() / row_size;
  if (rows != targets.size() / target_size)
    throw data_error(where + std::to_string(rows) + " rows of " + std::to_string(row_size) + " features but " +
                     std::to_string(targets.size() / target_size) + " rows of " + std::to_string(target_size) +
                     " targets");
  detail::check_finite(where, features, row_size, "feature");
  detail::check_finite(where, targets, target_size, "target");
  return dataset{tensor<float, cpu, 2>(shape<2>{rows, row_size}, features), tensor<std::int32_t, cpu>(),
                 tensor<float, cpu, 2>(shape<2>{rows, target_size}, targets)};
}

LOCUS_RUNTIME_INLINE dataset make_dataset(const tensor<float, cpu, 2>& features, const tensor<float, cpu, 2>& targets) {
  if (features.extent(0) != targets.extent(0))
    throw data_error("locus: make_dataset: " + std::to_string(features.extent(0)) + " rows of features but " +
                     std::to_string(targets.extent(0)) + " rows of targets");
  return make_dataset(std::span<const float>(features.data(), features.size()), features.extent(1),
                      std::span<const float>(targets.data(), targets.size()), targets.extent(1));
}

LOCUS_RUNTIME_INLINE split_parts split(const dataset& d, double validation_fraction, std::uint64_t seed) {
  const std::size_t rows = d.images.extent(0);
  const bool with_labels = d.labels.size() != 0, with_values = d.has_targets();
  if (with_labels && rows != d.labels.size())
    throw data_error("locus: split: the dataset has " + std::to_string(rows) + " rows of features but " +
                     std::to_string(d.labels.size()) + " labels");
  if (with_values && rows != d.targets.extent(0))
    throw data_error("locus: split: the dataset has " + std::to_string(rows) + " rows of features but " +
                     std::to_string(d.targets.extent(0)) + " rows of targets");
  if (!with_labels && !with_values)
    throw data_error("locus: split: the dataset has " + std::to_string(rows) + " rows of features and neither "
                     "labels nor targets");
  if (!(validation_fraction > 0.0 && validation_fraction < 1.0))
    throw config_error("locus: split: the validation fraction must lie in (0, 1), not " +
                       detail::shortest(validation_fraction));
  const double wanted = std::round(validation_fraction * static_cast<double>(rows));
  if (wanted < 1.0 || wanted > static_cast<double>(rows) - 1.0)
    throw config_error("locus: split: a validation fraction of " + detail::shortest(validation_fraction) + " of " +
                       std::to_string(rows) + " rows leaves " + (wanted < 1.0 ? "the validation" : "the training") +
                       " part empty");
  const auto take = static_cast<std::size_t>(wanted);
  // The first `take` entries of a seeded Fisher-Yates shuffle of the row indices (a draw modulo
  // the range: its bias, rows / 2^64, is nothing for any data set that fits in memory).
  std::vector<std::size_t> order(rows);
  for (std::size_t i = 0; i < rows; ++i) order[i] = i;
  std::uint64_t state = seed;
  for (std::size_t i = 0; i < take; ++i) {
    const std::size_t j = i + static_cast<std::size_t>(detail::splitmix64(state) % (rows - i));
    std::swap(order[i], order[j]);
  }
  std::vector<char> in_validation(rows, 0);
  for (std::size_t i = 0; i < take; ++i) in_validation[order[i]] = 1;
  // Each part's rows in d's order: features, labels and targets alike.
  const auto part = [&](char validation, std::size_t count) {
    const auto rows_of = [&]<class T>(const T* from, std::size_t width) {
      std::vector<T> out;
      out.reserve(count * width);
      for (std::size_t r = 0; r < rows; ++r)
        if (in_validation[r] == validation) out.insert(out.end(), from + r * width, from + (r + 1) * width);
      return out;
    };
    const std::size_t cols = d.images.extent(1), k = with_values ? d.targets.extent(1) : 0;
    dataset out{tensor<float, cpu, 2>(shape<2>{count, cols}, rows_of(d.images.data(), cols)), {}, {}};
    if (with_labels) out.labels = tensor<std::int32_t, cpu>(rows_of(d.labels.data(), std::size_t(1)));
    if (with_values) out.targets = tensor<float, cpu, 2>(shape<2>{count, k}, rows_of(d.targets.data(), k));
    return out;
  };
  return {part(0, rows - take), part(1, take)};
}
#endif

}  // namespace locus::data
