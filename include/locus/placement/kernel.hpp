#pragma once
// Kernel availability: has_kernel<Op, Device, T> says whether operation Op has a kernel for
// elements of type T on Device. on<D>(expr) with an operation lacking a kernel does not compile
// (TensorFlow's "no supported kernel" error, at compile time) unless the policy is soft_placement.
//
// Defaults: every operation runs on the cpu; on GPUs an operation runs for arithmetic types other
// than long double (device code has no long double), unless it is host-only (a map() function
// object with `static constexpr bool host_only = true`). Users specialise the trait for their own
// operations and types, e.g.
//     template <int N> struct locus::has_kernel<locus::ops::mapped<my_op>, locus::gpu<N>, float>
//         : std::false_type {};
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/tensor/half.hpp>

#include <type_traits>

namespace locus {

namespace detail {
template <class Op>
constexpr bool op_host_only() {
  if constexpr (requires { Op::host_only; }) return Op::host_only;
  else return false;
}
template <class T>
inline constexpr bool gpu_element_type = (std::is_arithmetic_v<T> && !std::is_same_v<T, long double>) || is_half_float_v<T>;
}  // namespace detail

template <class Op, class Device, class T>
struct has_kernel
    : std::bool_constant<Device::kind == device_kind::cpu ||
                         (detail::gpu_element_type<T> && !detail::op_host_only<Op>())> {};

template <class Op, class Device, class T>
inline constexpr bool has_kernel_v = has_kernel<Op, Device, T>::value;

}  // namespace locus
