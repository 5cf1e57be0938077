#pragma once
// Placement policies: the second argument of on<D, Policy>(expr).
#include <locus/config.hpp>

namespace locus {

/// The default. Every operand must live on D and every operation must have a kernel for D, or the
/// program does not compile.
struct strict {};

/// TensorFlow's allow_soft_placement: an expression with an operation that has no kernel for D is
/// evaluated on the cpu instead (its operands copied there, each copy logged), and on<D, ...>
/// returns a tensor on the cpu. Operands must still live on D.
struct soft_placement {};

/// Opt-in: operands that live on another device are copied to D first, each copy logged.
struct implicit_transfers {};

namespace detail {
template <class P>
inline constexpr bool is_policy = false;
template <>
inline constexpr bool is_policy<strict> = true;
template <>
inline constexpr bool is_policy<soft_placement> = true;
template <>
inline constexpr bool is_policy<implicit_transfers> = true;
}  // namespace detail

}  // namespace locus
