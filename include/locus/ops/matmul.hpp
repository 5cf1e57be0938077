#pragma once
// matmul(A, B): the matrix product of two rank-2 tensors (or views, or transpose(t) of them), placed
// and checked like every expression:
//     auto C = on<gpu<0>>(matmul(A, B));     // cuBLAS on GPUs, BLAS (or a blocked loop) on the host
//     C = matmul(transpose(X), dY);          // into C's storage, no temporary
//     C += matmul(A, B);                     // BLAS beta = 1
// A product reads memory: an operand that is an expression (`matmul(relu(h), W)`) is evaluated into
// a temporary first, on the device the product runs on; transpose(t) takes a tensor or view. A
// product is itself an operand of other expressions (`relu(matmul(x, W) + b)`, expr::staged).
// A destination that overlaps an operand gets a temporary.
#include <locus/backend/blas.hpp>
#include <locus/backend/memory.hpp>
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/expr/node.hpp>
#include <locus/expr/operators.hpp>
#include <locus/tensor/tensor.hpp>

#include <string>
#include <type_traits>
#include <utility>

namespace locus {

/// matmul(a, b, tf32): a float product that may use the GPU's TF32 tensor cores (10-bit mantissa
/// products, float accumulation; NVIDIA's H100 table: 495 TFLOPS dense against 67 in float), an
/// explicit opt-in, never a default. Host-run devices compute it in full float.
struct tf32_t {
  explicit tf32_t() = default;
};
inline constexpr tf32_t tf32{};

namespace ops {
struct matmul {
  static constexpr const char* name = "matmul";
  static constexpr const char* type = "MatMul";
};
}  // namespace ops

namespace expr {

/// transpose(t): a rank-2 operand read as its transpose, for matmul.
template <class L>
struct transposed {
  L leaf;
};

namespace detail {
template <class X>
struct matmul_operand {
  static constexpr bool is_transposed = false;
};
template <class L>
struct matmul_operand<transposed<L>> {
  static constexpr bool is_transposed = true;
};
template <class X>
const auto& leaf_of(const X& x) {
  if constexpr (matmul_operand<X>::is_transposed) return x.leaf;
  else return x;
}
template <class X>
constexpr bool is_memory_leaf = requires { typename X::device_type; } && !requires { X::is_column; };
/// One function for every product type: the message is compiled once, not once per product.
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_inner_mismatch(const std::string& a, bool ta, const std::string& b,
                                                            bool tb);
#if LOCUS_RUNTIME_DEFINITIONS
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_inner_mismatch(const std::string& a, bool ta, const std::string& b,
                                                            bool tb) {
  throw shape_error("locus: matmul: the inner extents differ: " + a + (ta ? "^T" : "") + " x " + b + (tb ? "^T" : ""));
}
#endif
}  // namespace detail

/// transpose(x) for matmul: a rank-2 tensor, view or expression (an expression is staged first).
template <operand X>
  requires(!has_var_v<node_t<X>>)  // a variable's transpose is locus::ad's
[[nodiscard]] auto transpose(X&& x) {
  using N = node_t<X>;
  static_assert(N::rank == 2, "locus: transpose(x) takes a rank-2 operand");
  if constexpr (detail::is_memory_leaf<N> || is_staged_v<N>) return transposed<N>{as_node(std::forward<X>(x))};
  else return transposed<staged<N>>{staged<N>{as_node(std::forward<X>(x))}};
}

template <class A, class B>
struct matmul_expr {
  using locus_special = void;
  using LA = std::remove_cvref_t<decltype(detail::leaf_of(std::declval<const A&>()))>;
  using LB = std::remove_cvref_t<decltype(detail::leaf_of(std::declval<const B&>()))>;
  using value_type = typename LA::value_type;
  static constexpr int rank = 2;
  static constexpr bool accumulates = true;
  static constexpr bool ta = detail::matmul_operand<A>::is_transposed;
  static constexpr bool tb = detail::matmul_operand<B>::is_transposed;
  using devices = merge_t<typename LA::devices, typename LB::devices>;
  using operations = merge_t<type_list<operation<ops::matmul, value_type>>, typename LA::operations, typename LB::operations>;
  static constexpr bool has_staged = has_staged_v<LA> || has_staged_v<LB>;
  static constexpr bool has_var = has_var_v<LA> || has_var_v<LB>;

  LA a;
  LB b;
  bool accumulate = false;
  bool tf32 = false;  // matmul(a, b, tf32): TF32 tensor cores allowed on CUDA GPUs

  matmul_expr(LA a_, LB b_, bool acc = false, bool fast = false)
      : a(std::move(a_)), b(std::move(b_)), accumulate(acc), tf32(fast) {
    if (inner_a() != inner_b()) detail::throw_inner_mismatch(a.shape().str(), ta, b.shape().str(), tb);
  }

  [[nodiscard]] locus::shape<2> shape() const {
    return {ta ? a.shape()[1] : a.shape()[0], tb ? b.shape()[0] : b.shape()[1]};
  }
  [[nodiscard]] matmul_expr accumulating() const { return matmul_expr(a, b, true, tf32); }

  template <class V>
  void visit(V& v) const {
    a.visit(v);
    b.visit(v);
    v.op(ops::matmul::name, ops::matmul::type);
  }
  template <class F>
  [[nodiscard]] auto rebind(F& f) const {
    using RA = decltype(a.rebind(f));
    using RB = decltype(b.rebind(f));
    return matmul_expr<std::conditional_t<ta, transposed<RA>, RA>, std::conditional_t<tb, transposed<RB>, RB>>(
        a.rebind(f), b.rebind(f), accumulate, tf32);
  }

  template <device D>
  void write(const tensor_view<value_type, D, 2>& out) const {
    const auto s = shape();
    const value_type* pa = a.kernel().p;
    const value_type* pb = b.kernel().p;
    const std::size_t k = inner_a();
    if constexpr (is_half_float_v<value_type> && !backend::runs_on_host<D>) {
      // A CUDA GPU: cuBLAS's 16-bit product on the tensor cores, float accumulation, rounded once.
      into_out_or_temporary(out, pa, pb, [&](value_type* c) {
        backend::gemm_16bit<D>(ta, tb, s[0], s[1], k, pa, a.shape()[1], pb, b.shape()[1], accumulate, c, s[1]);
      });
    } else if constexpr (is_half_float_v<value_type>) {
      // Host-run devices: the operands widened to float, one float product (CBLAS), rounded once.
      auto fa = tensor<float, D, 2>::uninitialized_of(a.shape());
      auto fb = tensor<float, D, 2>::uninitialized_of(b.shape());
      auto fo = tensor<float, D, 2>::uninitialized_of(s);
      backend::transform<D>(fa.size(), load_kernel<value_type>{pa}, fa.data());
      backend::transform<D>(fb.size(), load_kernel<value_type>{pb}, fb.data());
      if (accumulate) backend::transform<D>(fo.size(), load_kernel<value_type>{out.data()}, fo.data());
      backend::gemm<D>(ta, tb, s[0], s[1], k, 1.f, fa.data(), a.shape()[1], fb.data(), b.shape()[1],
                       accumulate ? 1.f : 0.f, fo.data(), s[1]);
      backend::transform<D>(fo.size(), load_kernel<float>{fo.data()}, out.data());
    } else {
      into_out_or_temporary(out, pa, pb, [&](value_type* c) {
        backend::gemm<D>(ta, tb, s[0], s[1], k, value_type(1), pa, a.shape()[1], pb, b.shape()[1],
                         accumulate ? value_type(1) : value_type(0), c, s[1], tf32);
      });
    }
  }

private:
  /// product(c) writes the product into c: out itself, or a temporary copied into out when out
  /// overlaps an operand (holding out's values first when the product accumulates).
  template <device D, class F>
  void into_out_or_temporary(const tensor_view<value_type, D, 2>& out, const value_type* pa, const value_type* pb,
                             const F& product) const {
    const auto overlaps = [&](const value_type* p, std::size_t n) {
      return n != 0 && out.size() != 0 && p < out.data() + out.size() && out.data() < p + n;
    };
    if (!overlaps(pa, a.shape().size()) && !overlaps(pb, b.shape().size())) return product(out.data());
    auto tmp = tensor<value_type, D, 2>::uninitialized_of(out.shape());
    if (accumulate) backend::copy(id_of<D>, tmp.data(), id_of<D>, out.data(), out.size() * sizeof(value_type));
    product(tmp.data());
    backend::copy(id_of<D>, out.data(), id_of<D>, tmp.data(), out.size() * sizeof(value_type));
  }

  std::size_t inner_a() const { return ta ? a.shape()[0] : a.shape()[1]; }
  std::size_t inner_b() const { return tb ? b.shape()[1] : b.shape()[0]; }
};

/// An operand as an operation that reads memory takes it (matmul, conv2d, pooling): a memory leaf
/// or a staged operand as it is, anything else staged into a temporary.
template <class X>
auto memory_operand(X&& x) {
  auto n = as_node(std::forward<X>(x));
  using N = decltype(n);
  if constexpr (detail::is_memory_leaf<N> || is_staged_v<N>) return n;
  else return staged<N>{std::move(n)};
}

/// A matmul operand as the product reads it: transpose(t), or a memory operand.
template <class X>
auto matmul_operand_of(X&& x) {
  if constexpr (detail::matmul_operand<std::remove_cvref_t<X>>::is_transposed) return std::remove_cvref_t<X>(x);
  else return memory_operand(std::forward<X>(x));
}

/// A product of differentiable variables is locus::ad's (found by argument-dependent lookup).
template <class A, class B>
  requires(!has_var_v<std::remove_cvref_t<A>> && !has_var_v<std::remove_cvref_t<B>>)
[[nodiscard]] auto matmul(A&& a, B&& b) {
  using NA = decltype(matmul_operand_of(std::forward<A>(a)));
  using NB = decltype(matmul_operand_of(std::forward<B>(b)));
  using LA = std::remove_cvref_t<decltype(detail::leaf_of(std::declval<const NA&>()))>;
  using LB = std::remove_cvref_t<decltype(detail::leaf_of(std::declval<const NB&>()))>;
  static_assert(LA::rank == 2 && LB::rank == 2, "locus: matmul(A, B) takes rank-2 operands");
  static_assert(std::is_same_v<typename LA::value_type, typename LB::value_type>,
                "locus: matmul(A, B): A and B must have the same element type");
  auto na = matmul_operand_of(std::forward<A>(a));
  auto nb = matmul_operand_of(std::forward<B>(b));
  return matmul_expr<NA, NB>(detail::leaf_of(na), detail::leaf_of(nb));
}
/// matmul(a, b, tf32): the same float product, TF32 tensor cores allowed on CUDA GPUs (results
/// within about 1e-3 relative of the float product; host-run devices give the float product).
template <class A, class B>
  requires(!has_var_v<std::remove_cvref_t<A>> && !has_var_v<std::remove_cvref_t<B>>)
[[nodiscard]] auto matmul(A&& a, B&& b, tf32_t) {
  auto m = matmul(std::forward<A>(a), std::forward<B>(b));
  static_assert(std::is_same_v<typename decltype(m)::value_type, float>,
                "locus: matmul(a, b, tf32): TF32 is a mode of float products; the operands must be float");
  m.tf32 = true;
  return m;
}

}  // namespace expr

using expr::matmul;
using expr::transpose;

}  // namespace locus
