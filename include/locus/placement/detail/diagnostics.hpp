#pragma once
// The compile-time placement errors. Each is a class template whose instantiation fails with one
// static_assert stating the rule, the devices and the fix. A static_assert message must be a string
// literal in C++20, so the messages that name devices are spelled out, by macro, for cpu and
// gpu<0>..gpu<7>; for higher indices a generic message points at the template arguments, which
// the compiler prints in the instantiation note.
#include <locus/config.hpp>
#include <locus/device/device.hpp>

namespace locus::detail {

template <class>
inline constexpr bool always_false = false;

/// An operand on Operand, an expression bound to Target.
template <class Operand, class Target, class V = void>
struct misplaced_operand {
  static_assert(always_false<V>,
                "locus: an operand lives on another device than the one the expression is bound to (the operand's "
                "device and the target are the template arguments of locus::detail::misplaced_operand); copy it "
                "first with locus::to<Target>(x), or opt in with on<Target, locus::implicit_transfers>(expr)");
};

#define LOCUS_DETAIL_MISPLACED(OPERAND, OPERAND_NAME, TARGET, TARGET_NAME)                                    \
  template <class V>                                                                                         \
  struct misplaced_operand<OPERAND, TARGET, V> {                                                             \
    static_assert(always_false<V>, "locus: an operand lives on " OPERAND_NAME                                \
                                   " but the expression is bound to " TARGET_NAME "; copy it first with "   \
                                   "locus::to<" TARGET_NAME ">(x), or opt in with on<" TARGET_NAME           \
                                   ", locus::implicit_transfers>(expr)");                                    \
  };
#define LOCUS_DETAIL_FOR_EACH_OPERAND(X, T, TN)                                                              \
  X(cpu, "cpu", T, TN) X(gpu<0>, "gpu<0>", T, TN) X(gpu<1>, "gpu<1>", T, TN) X(gpu<2>, "gpu<2>", T, TN)      \
  X(gpu<3>, "gpu<3>", T, TN) X(gpu<4>, "gpu<4>", T, TN) X(gpu<5>, "gpu<5>", T, TN)                          \
  X(gpu<6>, "gpu<6>", T, TN) X(gpu<7>, "gpu<7>", T, TN)
#define LOCUS_DETAIL_MISPLACED_ON(T, TN) LOCUS_DETAIL_FOR_EACH_OPERAND(LOCUS_DETAIL_MISPLACED, T, TN)
LOCUS_DETAIL_MISPLACED_ON(cpu, "cpu")
LOCUS_DETAIL_MISPLACED_ON(gpu<0>, "gpu<0>")
LOCUS_DETAIL_MISPLACED_ON(gpu<1>, "gpu<1>")
LOCUS_DETAIL_MISPLACED_ON(gpu<2>, "gpu<2>")
LOCUS_DETAIL_MISPLACED_ON(gpu<3>, "gpu<3>")
LOCUS_DETAIL_MISPLACED_ON(gpu<4>, "gpu<4>")
LOCUS_DETAIL_MISPLACED_ON(gpu<5>, "gpu<5>")
LOCUS_DETAIL_MISPLACED_ON(gpu<6>, "gpu<6>")
LOCUS_DETAIL_MISPLACED_ON(gpu<7>, "gpu<7>")
#undef LOCUS_DETAIL_MISPLACED_ON
#undef LOCUS_DETAIL_FOR_EACH_OPERAND
#undef LOCUS_DETAIL_MISPLACED

/// Operation Op on elements T has no kernel for Target (TensorFlow's words).
template <class Target, class Op, class T, class V = void>
struct no_kernel {
  static_assert(always_false<V>,
                "locus: Could not satisfy explicit device specification because no supported kernel for the "
                "device is available (device, operation and element type are the template arguments of "
                "locus::detail::no_kernel); use on<D, locus::soft_placement>(expr) to fall back to the CPU");
};
#define LOCUS_DETAIL_NO_KERNEL(TARGET, SPEC, KIND)                                                           \
  template <class Op, class T, class V>                                                                      \
  struct no_kernel<TARGET, Op, T, V> {                                                                       \
    static_assert(always_false<V>, "locus: Could not satisfy explicit device specification '" SPEC           \
                                   "' because no supported kernel for " KIND " devices is available "       \
                                   "(the operation and element type are the template arguments of "         \
                                   "locus::detail::no_kernel); use on<D, locus::soft_placement>(expr) to "  \
                                   "fall back to the CPU, or evaluate it on the cpu");                       \
  };
LOCUS_DETAIL_NO_KERNEL(cpu, "/device:CPU:0", "CPU")
LOCUS_DETAIL_NO_KERNEL(gpu<0>, "/device:GPU:0", "GPU")
LOCUS_DETAIL_NO_KERNEL(gpu<1>, "/device:GPU:1", "GPU")
LOCUS_DETAIL_NO_KERNEL(gpu<2>, "/device:GPU:2", "GPU")
LOCUS_DETAIL_NO_KERNEL(gpu<3>, "/device:GPU:3", "GPU")
LOCUS_DETAIL_NO_KERNEL(gpu<4>, "/device:GPU:4", "GPU")
LOCUS_DETAIL_NO_KERNEL(gpu<5>, "/device:GPU:5", "GPU")
LOCUS_DETAIL_NO_KERNEL(gpu<6>, "/device:GPU:6", "GPU")
LOCUS_DETAIL_NO_KERNEL(gpu<7>, "/device:GPU:7", "GPU")
#undef LOCUS_DETAIL_NO_KERNEL

/// eval(expr) on an expression whose operands live on several devices.
template <class Devices, class V = void>
struct mixed_devices {
  static_assert(always_false<V>,
                "locus: eval(expr): the operands of this expression live on different devices (listed in the "
                "template arguments of locus::detail::mixed_devices); say where it runs with on<D>(expr) and "
                "copy the other operands with locus::to<D>(x)");
};

}  // namespace locus::detail
