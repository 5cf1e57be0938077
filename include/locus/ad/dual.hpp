#pragma once
// Dual numbers and the derivative of every elementwise operation.
//
// The backward pass of an elementwise expression e(v0, v1, ...) needs, for one operand v_k and at
// every element, de/dv_k. It is computed in forward mode inside the same fused kernel: the
// expression tree is copied with every operation Op replaced by dual_op<Op> and the operand v_k read
// as dual{v, 1} (every other one as dual{v, 0}); the kernel's value is then dual{e, de/dv_k}. One
// kernel per operand, however many operators the expression has, and no intermediate tensors.
//
// dual_op<Op> holds the derivative rules (one place, next to nothing else). An operation without a
// rule (a user's map(f, ...)) is a compile error only when a gradient must flow through it.
#include <locus/config.hpp>
#include <locus/expr/ops.hpp>
#include <locus/placement/kernel.hpp>

#include <cmath>
#include <type_traits>

namespace locus::ad {

/// A value and its derivative with respect to one seeded operand.
template <class T>
struct dual {
  static_assert(std::is_floating_point_v<T>, "locus: only floating-point values are differentiated");
  T v;
  T d;
};

template <class X>
inline constexpr bool is_dual_v = false;
template <class T>
inline constexpr bool is_dual_v<dual<T>> = true;

namespace detail {
template <class X>
struct value_of_s {
  using type = X;
};
template <class T>
struct value_of_s<dual<T>> {
  using type = T;
};
/// The floating-point type of the duals among Xs.
template <class... Xs>
using dual_value_t = std::common_type_t<typename value_of_s<Xs>::type...>;

/// x as a dual of T: a constant has derivative 0.
template <class T, class X>
LOCUS_HOST_DEVICE constexpr dual<T> lift(X x) {
  if constexpr (is_dual_v<X>) return {static_cast<T>(x.v), static_cast<T>(x.d)};
  else return {static_cast<T>(x), T(0)};
}
/// The value of x (a dual's value, anything else itself).
template <class X>
LOCUS_HOST_DEVICE constexpr auto value(X x) {
  if constexpr (is_dual_v<X>) return x.v;
  else return x;
}

template <class>
inline constexpr bool no_rule = false;

template <class Op>
struct is_cast : std::false_type {};
template <class U>
struct is_cast<locus::ops::cast<U>> : std::true_type {
  using target = U;
};
}  // namespace detail

/// Op evaluated on duals. With no dual operand it is Op itself (a branch of the tree that does not
/// depend on the differentiated operand). Names, types and host_only are Op's (the placement log
/// and the kernel checks see the original operation).
template <class Op>
struct dual_op {
  static constexpr const char* name = locus::ops::detail::mapped_name<Op>();
  static constexpr const char* type = locus::ops::detail::mapped_type<Op>();
  static constexpr bool host_only = locus::detail::op_host_only<Op>();
  Op op;

  LOCUS_EXEC_CHECK_DISABLE
  template <class... A>
  LOCUS_HOST_DEVICE auto operator()(A... a) const {
    if constexpr (!(is_dual_v<A> || ...)) {
      return op(a...);
    } else {
      using T = detail::dual_value_t<A...>;
      return rule(T{}, a...);
    }
  }

private:
  // Comparisons and integer casts: no derivative, the value only.
  template <class T, class... A>
  LOCUS_HOST_DEVICE auto rule(T, A... a) const {
    namespace o = locus::ops;
    if constexpr (std::is_same_v<Op, o::less> || std::is_same_v<Op, o::less_equal> ||
                  std::is_same_v<Op, o::greater> || std::is_same_v<Op, o::greater_equal> ||
                  std::is_same_v<Op, o::equal> || std::is_same_v<Op, o::not_equal>) {
      return op(detail::value(a)...);
    } else if constexpr (sizeof...(A) == 1) {
      return unary(detail::lift<T>(a)...);
    } else if constexpr (std::is_same_v<Op, o::select>) {
      return select(a...);
    } else {
      return binary(detail::lift<T>(a)...);
    }
  }

  template <class C, class Y, class Z>
  LOCUS_HOST_DEVICE auto select(C c, Y y, Z z) const {
    using T = detail::dual_value_t<Y, Z>;
    return detail::value(c) ? detail::lift<T>(y) : detail::lift<T>(z);
  }

  // An operand that does not depend on the seeded one (derivative 0) has derivative 0 through
  // every rule: the chain rule's product is not formed (0 * inf and 0 / 0 would be NaN: the
  // gradient of sum(log(x) * y) with respect to y is log(x), -inf at x = 0, not NaN).
  template <class T>
  LOCUS_HOST_DEVICE auto unary(dual<T> a) const {
    namespace o = locus::ops;
    using std::exp, std::log, std::sqrt, std::tanh;
    [[maybe_unused]] const bool constant = a.d == T(0);
    if constexpr (std::is_same_v<Op, o::neg>) {
      return dual<T>{-a.v, -a.d};
    } else if constexpr (std::is_same_v<Op, o::exp>) {
      const T e = exp(a.v);
      return dual<T>{e, constant ? T(0) : e * a.d};
    } else if constexpr (std::is_same_v<Op, o::log>) {
      return dual<T>{log(a.v), constant ? T(0) : a.d / a.v};
    } else if constexpr (std::is_same_v<Op, o::sqrt>) {
      const T s = sqrt(a.v);
      return dual<T>{s, constant ? T(0) : a.d / (T(2) * s)};
    } else if constexpr (std::is_same_v<Op, o::tanh>) {
      const T t = tanh(a.v);
      return dual<T>{t, constant ? T(0) : a.d * (T(1) - t * t)};
    } else if constexpr (std::is_same_v<Op, o::sigmoid>) {
      const T s = op(a.v);
      return dual<T>{s, constant ? T(0) : a.d * s * (T(1) - s)};
    } else if constexpr (std::is_same_v<Op, o::relu>) {
      return a.v > T(0) || locus::ops::is_nan(a.v) ? a : dual<T>{T(0), T(0)};  // relu(NaN) is NaN
    } else if constexpr (std::is_same_v<Op, o::identity>) {
      return a;
    } else if constexpr (std::is_same_v<Op, o::abs>) {
      return a.v < T(0) ? dual<T>{-a.v, -a.d} : a;
    } else if constexpr (detail::is_cast<Op>::value) {
      using U = typename detail::is_cast<Op>::target;
      if constexpr (std::is_floating_point_v<U>) {
        return dual<U>{static_cast<U>(a.v), static_cast<U>(a.d)};
      } else if constexpr (is_half_float_v<U>) {
        // Rounded to U and read back as float; the derivative passes (rounding's derivative is
        // taken as 1, as PyTorch's cast backward does).
        return dual<float>{static_cast<float>(static_cast<U>(a.v)), static_cast<float>(a.d)};
      } else {
        return static_cast<U>(a.v);  // to an integer or bool: no derivative
      }
    } else {
      static_assert(detail::no_rule<Op>,
                    "locus: ad: this operation has no derivative (a map(f, ...) cannot be differentiated): "
                    "compute it from the parameters' values with on<D>(...) and use it as a constant");
      return a;
    }
  }

  template <class T>
  LOCUS_HOST_DEVICE auto binary(dual<T> a, dual<T> b) const {
    namespace o = locus::ops;
    using std::log, std::pow;
    if constexpr (std::is_same_v<Op, o::add>) {
      return dual<T>{a.v + b.v, a.d + b.d};
    } else if constexpr (std::is_same_v<Op, o::sub>) {
      return dual<T>{a.v - b.v, a.d - b.d};
    } else if constexpr (std::is_same_v<Op, o::mul>) {
      // A term whose derivative is 0 (a constant operand) is dropped, not multiplied: 2 * x has
      // derivative 2 where x is infinite or NaN, as in a reverse-mode product rule.
      return dual<T>{a.v * b.v, (a.d == T(0) ? T(0) : a.d * b.v) + (b.d == T(0) ? T(0) : a.v * b.d)};
    } else if constexpr (std::is_same_v<Op, o::div>) {
      const T q = a.v / b.v;
      return dual<T>{q, (a.d == T(0) ? T(0) : a.d / b.v) - (b.d == T(0) ? T(0) : q * b.d / b.v)};
    } else if constexpr (std::is_same_v<Op, o::minimum>) {
      // The operand the value came from (ties: a; a NaN wins, as ops::minimum).
      using locus::ops::is_nan;
      return is_nan(a.v) ? a : is_nan(b.v) ? b : b.v < a.v ? b : a;
    } else if constexpr (std::is_same_v<Op, o::maximum>) {
      using locus::ops::is_nan;
      return is_nan(a.v) ? a : is_nan(b.v) ? b : a.v < b.v ? b : a;
    } else if constexpr (std::is_same_v<Op, o::pow>) {
      const T p = pow(a.v, b.v);
      // d(a^b) = b a^(b-1) da + a^b log(a) db; the second term only where b varies (log of a
      // negative base would be NaN where the exponent is a constant).
      T d = a.d == T(0) ? T(0) : b.v * pow(a.v, b.v - T(1)) * a.d;
      if (b.d != T(0)) d += p * log(a.v) * b.d;
      return dual<T>{p, d};
    } else {
      static_assert(detail::no_rule<Op>,
                    "locus: ad: this operation has no derivative (a map(f, ...) cannot be differentiated): "
                    "compute it from the parameters' values with on<D>(...) and use it as a constant");
      return a;
    }
  }
};

}  // namespace locus::ad

namespace locus {
/// A dual operation has a kernel wherever the operation has one for the underlying type.
template <class Op, class Device, class T>
struct has_kernel<ad::dual_op<Op>, Device, ad::dual<T>> : has_kernel<Op, Device, T> {};
}  // namespace locus

template <class T, class U>
  requires std::is_arithmetic_v<U>
struct std::common_type<locus::ad::dual<T>, U> {
  using type = locus::ad::dual<T>;
};
template <class T, class U>
  requires std::is_arithmetic_v<U>
struct std::common_type<U, locus::ad::dual<T>> {
  using type = locus::ad::dual<T>;
};
