#pragma once
// The flat parameter layout: a model's parameter tensors seen as one vector, their concatenation
// in for_each order. It is what is averaged, updated, copied between devices and saved; these are
// the only loops that walk its offsets.
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/tensor/transfer.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace locus::train {

/// Views of the consecutive segments of a flat buffer, one per tensor of `like`, shaped like it.
template <class T, device D, class V>
[[nodiscard]] std::vector<tensor_view<T, D, 1>> segments(T* flat, const std::vector<V>& like) {
  std::vector<tensor_view<T, D, 1>> out;
  out.reserve(like.size());
  std::size_t offset = 0;
  for (const auto& v : like) {
    out.emplace_back(flat + offset, shape{v.size()});
    offset += v.size();
  }
  return out;
}

/// The elements of all `views`, together.
template <class V>
[[nodiscard]] std::size_t flat_size(const std::vector<V>& views) noexcept {
  std::size_t n = 0;
  for (const auto& v : views) n += v.size();
  return n;
}

/// Copies the tensors `views` (of device D) into the flat buffer `flat` (of device D2), in order.
template <class V, device D2>
void pack(const std::vector<V>& views, const tensor_view<float, D2, 1>& flat) {
  if (flat.size() < flat_size(views))
    throw shape_error("locus: pack: a flat buffer of " + std::to_string(flat.size()) + " elements for " +
                      std::to_string(flat_size(views)));
  std::size_t offset = 0;
  for (const auto& v : views) {
    locus::transfer(tensor_view<float, D2, 1>(flat.data() + offset, shape{v.size()}), v);
    offset += v.size();
  }
}

/// Copies the flat buffer `flat` (of any device) into the tensors `views`, in order.
template <class V, class F>
void unpack(const F& flat, const std::vector<V>& views) {
  using D = typename F::device_type;
  if (flat.size() < flat_size(views))
    throw shape_error("locus: unpack: a flat buffer of " + std::to_string(flat.size()) + " elements for " +
                      std::to_string(flat_size(views)));
  std::size_t offset = 0;
  for (const auto& v : views) {
    locus::transfer(v, tensor_view<const float, D, 1>(flat.data() + offset, shape{v.size()}));
    offset += v.size();
  }
}

/// The tensors `views` as one host vector.
template <class V>
[[nodiscard]] std::vector<float> to_host(const std::vector<V>& views) {
  std::vector<float> out(flat_size(views));
  pack(views, tensor_view<float, cpu, 1>(out.data(), shape{out.size()}));
  return out;
}

/// The host vector `flat` into the tensors `views`.
template <class V>
void from_host(const std::vector<float>& flat, const std::vector<V>& views) {
  unpack(tensor_view<const float, cpu, 1>(flat.data(), shape{flat.size()}), views);
}

}  // namespace locus::train
