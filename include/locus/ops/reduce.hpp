#pragma once
// Reductions: sum, mean, max, min, argmax, dot, norm, count_if, over a whole tensor or expression
// (a rank-0 result) or along an axis of a rank-2 one (sum<1>(m): one value per row; sum<0>(m): one
// per column). A reduction of an expression is one pass: `dot(a, b)` and `sum(a * b)` read a and b
// once, with no temporary. Like every locus expression it runs only when bound to a device:
//     auto s = on<gpu<0>>(sum(a * b));      // tensor<float, gpu<0>, 0>; s.item() copies it out
//     auto r = on<gpu<0>>(argmax<1>(m));    // tensor<std::int64_t, gpu<0>>, one index per row
// A reduction is also an operand of other expressions (`sum(a) + sum(b)`, `x - col(max<1>(x))`): it
// is evaluated into a temporary first (expr::staged), the rest fused over it.
#include <locus/backend/parallel.hpp>
#include <locus/backend/reduce.hpp>
#include <locus/config.hpp>
#include <locus/errors.hpp>
#include <locus/device/device.hpp>
#include <locus/expr/node.hpp>
#include <locus/expr/operators.hpp>
#include <locus/tensor/tensor.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

namespace locus {

/// Axis argument meaning "every element".
inline constexpr int all_axes = -1;

namespace reducers {

/// Host accumulators are wider than float (a sum of 2^25 floats keeps its digits); GPU ones are
/// the element type (CUB's tree reduction is accurate and double is slow on many GPUs). Integers
/// and bool add in uint64 on every device: wrapping is defined there, never a signal or UB.
template <class T, bool Host>
using sum_acc_t = std::conditional_t<std::is_integral_v<T>, std::uint64_t,
                                     std::conditional_t<Host && std::is_same_v<T, float>, double, T>>;
/// What a sum returns, as numpy: the element type for floating point, int64 for bool and signed
/// integers, uint64 for unsigned ones (an int32 or uint8 sum does not wrap at 32 or 8 bits; an int64
/// one wraps modulo 2^64).
template <class T>
using sum_result_t =
    std::conditional_t<std::is_floating_point_v<T>, T,
                       std::conditional_t<std::is_unsigned_v<T> && !std::is_same_v<T, bool>, std::uint64_t, std::int64_t>>;

struct sum {
  static constexpr const char* name = "sum";
  static constexpr const char* type = "Sum";
  template <class T, bool Host>
  struct reducer {
    using acc = sum_acc_t<T, Host>;
    using result = sum_result_t<T>;
    LOCUS_HOST_DEVICE acc identity() const { return acc(0); }
    LOCUS_HOST_DEVICE acc lift(T v, std::size_t) const { return static_cast<acc>(v); }
    LOCUS_HOST_DEVICE acc combine(acc a, acc b) const { return a + b; }
    LOCUS_HOST_DEVICE result finish(acc a, std::size_t) const { return static_cast<result>(a); }
    // Host lanes in the element type, folded into the wide accumulator every block of 2048.
    static constexpr bool additive = true;
    using lane = std::conditional_t<std::is_floating_point_v<T>, T, acc>;
    lane lane_identity() const { return lane(0); }
    lane lane_lift(T v, std::size_t) const { return static_cast<lane>(v); }
    lane lane_combine(lane a, lane b) const { return a + b; }
    acc fold(acc a, lane b) const { return a + static_cast<acc>(b); }
  };
};
struct dot : sum {
  static constexpr const char* name = "dot";
  static constexpr const char* type = "Dot";
};
struct mean {
  static constexpr const char* name = "mean";
  static constexpr const char* type = "Mean";
  /// Floating point: the sum's accumulator, divided by the count.
  template <class T, bool Host>
  struct reducer : sum::reducer<T, Host> {
    using base = sum::reducer<T, Host>;
    using result = T;
    LOCUS_HOST_DEVICE result finish(typename base::acc a, std::size_t n) const {
      return static_cast<result>(static_cast<result>(a) / static_cast<result>(n));
    }
  };
  /// Integers and bool: added in double, as numpy's mean does (an int64 sum would wrap at 2^63:
  /// the mean of {INT64_MAX, INT64_MAX} is 9.2e18, not -1).
  template <class T, bool Host>
    requires std::is_integral_v<T>
  struct reducer<T, Host> {
    using acc = double;
    using result = double;
    LOCUS_HOST_DEVICE acc identity() const { return 0.0; }
    LOCUS_HOST_DEVICE acc lift(T v, std::size_t) const { return static_cast<acc>(v); }
    LOCUS_HOST_DEVICE acc combine(acc a, acc b) const { return a + b; }
    LOCUS_HOST_DEVICE result finish(acc a, std::size_t n) const { return a / static_cast<double>(n); }
    static constexpr bool additive = true;
    using lane = double;
    lane lane_identity() const { return 0.0; }
    lane lane_lift(T v, std::size_t) const { return static_cast<lane>(v); }
    lane lane_combine(lane a, lane b) const { return a + b; }
    acc fold(acc a, lane b) const { return a + b; }
  };
};
struct norm {
  static constexpr const char* name = "norm";
  static constexpr const char* type = "EuclideanNorm";
  template <class T, bool Host>
  struct reducer : sum::reducer<T, Host> {
    using base = sum::reducer<T, Host>;
    using result = std::conditional_t<std::is_floating_point_v<T>, T, double>;
    LOCUS_HOST_DEVICE typename base::acc lift(T v, std::size_t) const {
      return static_cast<typename base::acc>(v) * static_cast<typename base::acc>(v);
    }
    typename base::lane lane_lift(T v, std::size_t) const {
      return static_cast<typename base::lane>(v) * static_cast<typename base::lane>(v);
    }
    LOCUS_HOST_DEVICE result finish(typename base::acc a, std::size_t) const {
      return static_cast<result>(std::sqrt(static_cast<result>(a)));
    }
  };
};
struct count_if {
  static constexpr const char* name = "count_if";
  static constexpr const char* type = "CountNonzero";
  template <class T, bool Host>
  struct reducer {
    using acc = std::int64_t;
    using result = std::int64_t;
    LOCUS_HOST_DEVICE acc identity() const { return 0; }
    LOCUS_HOST_DEVICE acc lift(T v, std::size_t) const { return v ? 1 : 0; }
    LOCUS_HOST_DEVICE acc combine(acc a, acc b) const { return a + b; }
    LOCUS_HOST_DEVICE result finish(acc a, std::size_t) const { return a; }
  };
};
/// True for NaN (false for every integer).
template <class T>
LOCUS_HOST_DEVICE constexpr bool is_nan(T v) {
  return v != v;  // NOLINT(misc-redundant-expression)
}

/// The largest (Largest) or smallest element, as numpy: a NaN anywhere makes the result NaN; the
/// max of all -inf is -inf; an empty input is a shape_error (no identity is a right answer).
template <bool Largest>
struct extremum {
  static constexpr bool needs_elements = true;
  template <class T, bool Host>
  struct reducer {
    using acc = T;
    using result = T;
    LOCUS_HOST_DEVICE acc identity() const {
      if constexpr (std::numeric_limits<T>::has_infinity)
        return Largest ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
      else return Largest ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    }
    LOCUS_HOST_DEVICE acc lift(T v, std::size_t) const { return v; }
    LOCUS_HOST_DEVICE acc combine(acc a, acc b) const {
      if (is_nan(a)) return a;
      if (is_nan(b)) return b;
      return (Largest ? a < b : b < a) ? b : a;
    }
    LOCUS_HOST_DEVICE result finish(acc a, std::size_t) const { return a; }
  };
};
struct max : extremum<true> {
  static constexpr const char* name = "max";
  static constexpr const char* type = "Max";
};
struct min : extremum<false> {
  static constexpr const char* name = "min";
  static constexpr const char* type = "Min";
};
/// The index of the first largest element; as numpy, of the first NaN when there is one. An empty
/// input is a shape_error.
struct argmax {
  static constexpr bool needs_elements = true;
  static constexpr const char* name = "argmax";
  static constexpr const char* type = "ArgMax";
  template <class T>
  struct value_index {
    T value;
    std::int64_t index;
  };
  template <class T, bool Host>
  struct reducer {
    using acc = value_index<T>;
    using result = std::int64_t;
    LOCUS_HOST_DEVICE acc identity() const { return {std::numeric_limits<T>::lowest(), -1}; }
    LOCUS_HOST_DEVICE acc lift(T v, std::size_t i) const { return {v, static_cast<std::int64_t>(i)}; }
    LOCUS_HOST_DEVICE acc combine(acc a, acc b) const {
      if (a.index < 0) return b;
      if (b.index < 0) return a;
      const bool na = is_nan(a.value), nb = is_nan(b.value);
      if (na || nb) return (na && nb) ? (b.index < a.index ? b : a) : (na ? a : b);
      if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
      return a;
    }
    LOCUS_HOST_DEVICE result finish(acc a, std::size_t) const { return a.index; }
  };
};

}  // namespace reducers

namespace expr {

namespace detail {
template <class Family, class T>
struct reduction_result {
  using computed = typename Family::template reducer<compute_t<T>, true>::result;
  static constexpr bool chooses = requires { Family::needs_elements; };
  using type = std::conditional_t<is_half_float_v<T> && chooses && std::is_same_v<computed, float>, T, computed>;
};
}  // namespace detail

/// A reduction of node N along Axis (all_axes, 0 or 1) by the reducer family Family.
template <class Family, int Axis, class N>
struct reduction {
  static_assert(Axis == all_axes || N::rank == 2,
                "locus: a reduction along an axis needs a rank-2 operand (reduce a rank-1 one whole)");
  static_assert(Axis == all_axes || Axis == 0 || Axis == 1, "locus: a rank-2 reduction runs along axis 0 or 1");
  using locus_special = void;
  using element_type = typename N::value_type;
  /// 16-bit elements are reduced in float (the kernel reads them as float): sum, mean, dot and norm
  /// return float (a million bfloat16 ones sum to 1e6, not to a 16-bit accumulator's 256); max and
  /// min return the element they chose, in the element type.
  using compute_type = compute_t<element_type>;
  using value_type = typename detail::reduction_result<Family, element_type>::type;
  static constexpr int rank = Axis == all_axes ? 0 : 1;
  using devices = typename N::devices;
  using operations = merge_t<type_list<operation<Family, element_type>>, typename N::operations>;
  static constexpr bool has_staged = has_staged_v<N>;
  static constexpr bool has_var = has_var_v<N>;

  N child;

  [[nodiscard]] locus::shape<rank> shape() const {
    if constexpr (Axis == all_axes) return {};
    else return {child.shape()[Axis == 1 ? 0 : 1]};
  }
  template <class V>
  void visit(V& v) const {
    child.visit(v);
    v.op(Family::name, Family::type);
  }
  template <class F>
  [[nodiscard]] auto rebind(F& f) const {
    return reduction<Family, Axis, decltype(child.rebind(f))>{child.rebind(f)};
  }
  template <device D>
  void write(const tensor_view<value_type, D, rank>& out) const {
    using R = typename Family::template reducer<compute_type, backend::runs_on_host<D>>;
    if constexpr (requires { Family::needs_elements; }) {
      const std::size_t along = Axis == all_axes ? child.shape().size() : child.shape()[Axis == 1 ? 1 : 0];
      if (along == 0 && (Axis == all_axes || out.size() != 0))
        throw shape_error(std::string("locus: ") + Family::name + " of an empty " +
                          (Axis == all_axes ? "input" : "axis") + " (shape " + child.shape().str() +
                          "): it has no elements to choose from");
    }
    if constexpr (Axis == all_axes) {
      backend::reduce<D>(child.shape().size(), child.kernel(), R{}, out.data());
    } else {
      backend::reduce_axis<D, Axis>(child.shape()[0], child.shape()[1], child.kernel(), R{}, out.data());
    }
  }
};

// sum and mean of an expression that reads a differentiable variable are locus::ad's (found by
// argument-dependent lookup); max, min and norm of one have no derivative here; argmax and count_if
// read its values (their results are integers).
#define LOCUS_DETAIL_REDUCTION(NAME, FAMILY, VARS)                                 \
  template <int Axis = all_axes, operand E>                                        \
    requires(VARS != 0 || !has_var_v<node_t<E>>)                                   \
  [[nodiscard]] auto NAME(E&& e) {                                                 \
    static_assert(VARS != 1 || !has_var_v<node_t<E>>,                              \
                  "locus: ad: " #NAME " of an expression of variables has no derivative; reduce " \
                  "ad::detach(x) (its value, a constant) instead");                \
    return reduction<FAMILY, Axis, node_t<E>>{as_node(std::forward<E>(e))};        \
  }
LOCUS_DETAIL_REDUCTION(sum, reducers::sum, 0)
LOCUS_DETAIL_REDUCTION(mean, reducers::mean, 0)
LOCUS_DETAIL_REDUCTION(max, reducers::max, 1)
LOCUS_DETAIL_REDUCTION(min, reducers::min, 1)
LOCUS_DETAIL_REDUCTION(argmax, reducers::argmax, 2)
LOCUS_DETAIL_REDUCTION(norm, reducers::norm, 1)
/// count_if(pred): the number of elements where pred (a comparison, say) is true.
LOCUS_DETAIL_REDUCTION(count_if, reducers::count_if, 2)
#undef LOCUS_DETAIL_REDUCTION

/// dot(a, b) = sum(a * b) in one pass; dot<1>(m, k): the dot product of each row pair.
template <int Axis = all_axes, operand A, operand B>
  requires(!has_var_v<node_t<A>> && !has_var_v<node_t<B>>)
[[nodiscard]] auto dot(A&& a, B&& b) try {
  auto product = std::forward<A>(a) * std::forward<B>(b);
  return reduction<reducers::dot, Axis, decltype(product)>{std::move(product)};
} catch (const shape_error& e) {
  detail::rethrow_as("dot", e);  // the product's "locus: mul: operand shapes ..." names the user's call
}

}  // namespace expr

using expr::argmax;
using expr::count_if;
using expr::dot;
using expr::max;  // again: a using-declaration names the overloads declared before it
using expr::mean;
using expr::min;
using expr::norm;
using expr::sum;

}  // namespace locus
