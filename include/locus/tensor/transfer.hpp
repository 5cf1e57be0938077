#pragma once
// to<D>(t): the explicit transfer. Host to GPU, GPU to host, GPU to GPU (peer copy, staged through
// pinned host memory where peer access is off). Every transfer between two devices is logged and
// counted in transfer_stats(); to<D>(t) with t already on D is a clone and moves nothing.
#include <locus/backend/memory.hpp>
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/log.hpp>
#include <locus/tensor/tensor.hpp>

#include <string>
#include <type_traits>

namespace locus {
namespace detail {
/// The bytes of a copy between two devices (or within one), logged and counted when they differ:
/// the run-time part of to<D>(t) and transfer(dst, src), one function whatever the devices.
#if !LOCUS_RUNTIME_DEFINITIONS
void transfer_bytes(device_id to, void* dst, device_id from, const void* src, std::size_t bytes);
#endif
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_transfer_mismatch(const std::string& src, const std::string& dst,
                                                               device_id from, device_id to);
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_transfer_of_empty(bool source);
#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE LOCUS_NOINLINE void transfer_bytes(device_id to, void* dst, device_id from, const void* src,
                                                        std::size_t bytes) {
  backend::copy(to, dst, from, src, bytes);
  if (to != from) log_transfer(from, to, bytes);
}
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_transfer_mismatch(const std::string& src, const std::string& dst,
                                                               device_id from, device_id to) {
  throw shape_error("locus: transfer: a source of shape " + src + " into a destination of shape " + dst + " (" +
                    from.full_name() + " -> " + to.full_name() + ")");
}
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_transfer_of_empty(bool source) {
  throw shape_error("locus: transfer: an empty rank-0 tensor (default-constructed or moved-from) as the " +
                    std::string(source ? "source" : "destination"));
}
#endif
}  // namespace detail

/// A copy of the viewed elements on device To.
template <device To, class T, device From, int R>
[[nodiscard]] tensor<std::remove_const_t<T>, To, R> to(const tensor_view<T, From, R>& v) {
  using U = std::remove_const_t<T>;
  if constexpr (R == 0)
    if (v.data() == nullptr) return tensor<U, To, R>{};  // an empty rank-0 tensor stays empty
  auto out = tensor<U, To, R>::uninitialized_of(v.shape());
  detail::transfer_bytes(id_of<To>, out.data(), id_of<From>, v.data(), v.size() * sizeof(U));
  if (v.name() != nullptr) out.set_name(v.name());
  return out;
}

/// A copy of t on device To (named like t).
template <device To, class T, device From, int R>
[[nodiscard]] tensor<T, To, R> to(const tensor<T, From, R>& t) {
  return to<To>(t.view());
}

/// Writes src's elements into dst's storage, across devices (logged and counted like to<D>):
/// the transfer into a buffer that already exists, without an allocation. The shapes must match.
template <class T, device To, device From, int R>
  requires(!std::is_const_v<T>)
void transfer(const tensor_view<T, To, R>& dst, const tensor_view<const T, From, R>& src) {
  if (dst.shape() != src.shape()) detail::throw_transfer_mismatch(src.shape().str(), dst.shape().str(), id_of<From>, id_of<To>);
  if constexpr (R == 0)
    if (dst.data() == nullptr || src.data() == nullptr) detail::throw_transfer_of_empty(src.data() == nullptr);
  detail::transfer_bytes(id_of<To>, dst.data(), id_of<From>, src.data(), src.size() * sizeof(T));
}
template <class T, device To, device From, int R>
  requires(!std::is_const_v<T>)
void transfer(const tensor_view<T, To, R>& dst, const tensor_view<T, From, R>& src) {
  transfer(dst, tensor_view<const T, From, R>(src));
}

}  // namespace locus
