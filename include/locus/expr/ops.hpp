#pragma once
// The elementwise operations: small function objects usable on host and device. `name` is the node
// name of TensorFlow's placement log, `type` its op type ("add: (Add): ...").
#include <locus/config.hpp>
#include <locus/tensor/half.hpp>

#include <cmath>
#include <type_traits>

namespace locus::ops {

/// x != x: true for a floating-point NaN, never for an integer.
template <class X>
LOCUS_HOST_DEVICE constexpr bool is_nan(X x) {
  if constexpr (std::is_floating_point_v<X>) return x != x;  // NOLINT(misc-redundant-expression)
  else return false;
}

#define LOCUS_DETAIL_BINARY_OP(NAME, LOG, TYPE, EXPR)                                     \
  struct NAME {                                                                           \
    static constexpr const char* name = LOG;                                              \
    static constexpr const char* type = TYPE;                                             \
    template <class A, class B>                                                           \
    LOCUS_HOST_DEVICE constexpr auto operator()(A a, B b) const {                         \
      using R = std::common_type_t<A, B>;                                                 \
      return static_cast<R>(EXPR);                                                        \
    }                                                                                     \
  };

/// Signed integers wrap modulo 2^N, as numpy's do (in C++ their overflow is undefined behaviour):
/// the operation runs on the unsigned type and converts back (modular since C++20).
template <class R, class F>
LOCUS_HOST_DEVICE constexpr R wrapping(R a, R b, F f) {
  if constexpr (std::is_integral_v<R> && std::is_signed_v<R>) {
    using U = std::make_unsigned_t<R>;
    return static_cast<R>(static_cast<U>(f(static_cast<U>(a), static_cast<U>(b))));
  } else {
    return static_cast<R>(f(a, b));
  }
}
struct plus_fn {
  template <class X>
  LOCUS_HOST_DEVICE constexpr X operator()(X a, X b) const { return static_cast<X>(a + b); }
};
struct minus_fn {
  template <class X>
  LOCUS_HOST_DEVICE constexpr X operator()(X a, X b) const { return static_cast<X>(a - b); }
};
struct times_fn {
  template <class X>
  LOCUS_HOST_DEVICE constexpr X operator()(X a, X b) const { return static_cast<X>(a * b); }
};
LOCUS_DETAIL_BINARY_OP(add, "add", "Add", wrapping<R>(static_cast<R>(a), static_cast<R>(b), plus_fn{}))
LOCUS_DETAIL_BINARY_OP(sub, "sub", "Sub", wrapping<R>(static_cast<R>(a), static_cast<R>(b), minus_fn{}))
LOCUS_DETAIL_BINARY_OP(mul, "mul", "Mul", wrapping<R>(static_cast<R>(a), static_cast<R>(b), times_fn{}))
// NaN wins, as in the reductions (max/min of anything holding a NaN is NaN) and numpy's maximum.
LOCUS_DETAIL_BINARY_OP(minimum, "minimum", "Minimum", is_nan(a) ? static_cast<R>(a) : is_nan(b) ? static_cast<R>(b) : b < a ? static_cast<R>(b) : static_cast<R>(a))
LOCUS_DETAIL_BINARY_OP(maximum, "maximum", "Maximum", is_nan(a) ? static_cast<R>(a) : is_nan(b) ? static_cast<R>(b) : a < b ? static_cast<R>(b) : static_cast<R>(a))
#undef LOCUS_DETAIL_BINARY_OP

/// a / b. Integers divide truncating toward zero, and where C++ has no answer (a signal on x86)
/// give numpy's, the same on every device: x / 0 is 0, and the most negative value / -1 is itself
/// (the quotient wraps). Floating point follows IEEE (x / 0 is +-inf, 0 / 0 NaN).
struct div {
  static constexpr const char* name = "truediv";
  static constexpr const char* type = "RealDiv";
  template <class A, class B>
  LOCUS_HOST_DEVICE constexpr auto operator()(A a, B b) const {
    using R = std::common_type_t<A, B>;
    if constexpr (std::is_integral_v<R>) {
      const R x = static_cast<R>(a), y = static_cast<R>(b);
      if (y == R(0)) return R(0);
      if constexpr (std::is_signed_v<R>)
        if (y == R(-1)) return static_cast<R>(R(0) - static_cast<std::make_unsigned_t<R>>(x));
      return static_cast<R>(x / y);
    } else {
      return static_cast<R>(a / b);
    }
  }
};

#define LOCUS_DETAIL_COMPARISON(NAME, LOG, TYPE, SYM)                                     \
  struct NAME {                                                                           \
    static constexpr const char* name = LOG;                                              \
    static constexpr const char* type = TYPE;                                             \
    template <class A, class B>                                                           \
    LOCUS_HOST_DEVICE constexpr bool operator()(A a, B b) const {                         \
      using R = std::common_type_t<A, B>;                                                 \
      return static_cast<R>(a) SYM static_cast<R>(b);                                     \
    }                                                                                     \
  };
LOCUS_DETAIL_COMPARISON(less, "less", "Less", <)
LOCUS_DETAIL_COMPARISON(less_equal, "less_equal", "LessEqual", <=)
LOCUS_DETAIL_COMPARISON(greater, "greater", "Greater", >)
LOCUS_DETAIL_COMPARISON(greater_equal, "greater_equal", "GreaterEqual", >=)
LOCUS_DETAIL_COMPARISON(equal, "equal", "Equal", ==)
LOCUS_DETAIL_COMPARISON(not_equal, "not_equal", "NotEqual", !=)
#undef LOCUS_DETAIL_COMPARISON

struct pow {
  static constexpr const char* name = "pow";
  static constexpr const char* type = "Pow";
  template <class A, class B>
  LOCUS_HOST_DEVICE auto operator()(A a, B b) const {
    using R = std::common_type_t<A, B>;
    return static_cast<R>(std::pow(static_cast<R>(a), static_cast<R>(b)));
  }
};

/// -a; the most negative signed integer negates to itself (wrapping), -0.0 stays signed.
template <class A>
LOCUS_HOST_DEVICE constexpr A negated(A a) {
  if constexpr (std::is_integral_v<A> && std::is_signed_v<A>) return wrapping<A>(A(0), a, minus_fn{});
  else return static_cast<A>(-a);
}

#define LOCUS_DETAIL_UNARY_OP(NAME, LOG, TYPE, EXPR)                                      \
  struct NAME {                                                                           \
    static constexpr const char* name = LOG;                                              \
    static constexpr const char* type = TYPE;                                             \
    template <class A>                                                                    \
    LOCUS_HOST_DEVICE auto operator()(A a) const {                                        \
      return static_cast<A>(EXPR);                                                        \
    }                                                                                     \
  };
LOCUS_DETAIL_UNARY_OP(neg, "neg", "Neg", negated(a))
LOCUS_DETAIL_UNARY_OP(exp, "exp", "Exp", std::exp(a))
LOCUS_DETAIL_UNARY_OP(log, "log", "Log", std::log(a))
LOCUS_DETAIL_UNARY_OP(sqrt, "sqrt", "Sqrt", std::sqrt(a))
LOCUS_DETAIL_UNARY_OP(tanh, "tanh", "Tanh", std::tanh(a))
LOCUS_DETAIL_UNARY_OP(sigmoid, "sigmoid", "Sigmoid", A(1) / (A(1) + std::exp(-a)))
LOCUS_DETAIL_UNARY_OP(relu, "relu", "Relu", a > A(0) || is_nan(a) ? a : A(0))  // relu(NaN) is NaN
LOCUS_DETAIL_UNARY_OP(identity, "identity", "Identity", a)
#undef LOCUS_DETAIL_UNARY_OP

struct abs {
  static constexpr const char* name = "abs";
  static constexpr const char* type = "Abs";
  template <class A>
  LOCUS_HOST_DEVICE A operator()(A a) const {
    if constexpr (std::is_unsigned_v<A>) return a;
    else return a < A(0) ? static_cast<A>(-a) : a;
  }
};

/// where(cond, a, b): TensorFlow's Select.
struct select {
  static constexpr const char* name = "select";
  static constexpr const char* type = "Select";
  template <class C, class A, class B>
  LOCUS_HOST_DEVICE auto operator()(C c, A a, B b) const {
    using R = std::common_type_t<A, B>;
    return c ? static_cast<R>(a) : static_cast<R>(b);
  }
};

/// static_cast<U>: to a 16-bit float type it rounds there and gives the float that is (computed
/// in float and stored as U: expr::node).
template <class U>
struct cast {
  static constexpr const char* name = "cast";
  static constexpr const char* type = "Cast";
  template <class A>
  LOCUS_HOST_DEVICE compute_t<U> operator()(A a) const {
    if constexpr (is_half_float_v<U>) return static_cast<float>(static_cast<U>(a));
    else return static_cast<U>(a);
  }
};

/// A user's function object applied elementwise (locus::map). Its log name and type come from
/// F::name / F::type when F has them, "map" / "Map" otherwise; F::host_only = true says it has no
/// GPU kernel (soft placement then runs it on the CPU).
namespace detail {
template <class F>
constexpr const char* mapped_name() {
  if constexpr (requires { F::name; }) return F::name;
  else return "map";
}
template <class F>
constexpr const char* mapped_type() {
  if constexpr (requires { F::type; }) return F::type;
  else return "Map";
}
template <class F>
constexpr bool mapped_host_only() {
  if constexpr (requires { F::host_only; }) return F::host_only;
  else return false;
}
}  // namespace detail

template <class F>
struct mapped {
  static constexpr const char* name = detail::mapped_name<F>();
  static constexpr const char* type = detail::mapped_type<F>();
  static constexpr bool host_only = detail::mapped_host_only<F>();
  F f;
  LOCUS_EXEC_CHECK_DISABLE
  template <class... A>
  LOCUS_HOST_DEVICE auto operator()(A... a) const {
    return f(a...);
  }
};

}  // namespace locus::ops
