#pragma once
// on<D, Policy>(expr): binds an expression to device D, checks placement at compile time, and
// evaluates it there as ONE fused kernel. The result lives on D (on<cpu> for soft placement that
// fell back), visible in its type: tensor<value_type, D, rank>.
//
// Note on the name: in P2300 (C++26 std::execution) `on(sch, work)` means "run there, come back".
// locus::on<D>(e) runs on D and the result STAYS on D; bring it back explicitly with to<cpu>(t).
//
// Also here: `c = expr` / `tensor<T, D> c = expr` (checked exactly like on<D>) and eval(expr), which
// runs where all of the expression's operands live.
#include <locus/backend/parallel.hpp>
#include <locus/backend/registry.hpp>
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/expr/direct.hpp>
#include <locus/expr/node.hpp>
#include <locus/expr/operators.hpp>
#include <locus/log.hpp>
#include <locus/placement/detail/diagnostics.hpp>
#include <locus/placement/kernel.hpp>
#include <locus/placement/policy.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/tensor/transfer.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace locus {
namespace detail {

// ---- compile-time queries over a node's type lists ------------------------------------------

struct no_missing_kernel {};

template <class D, class Ops>
struct first_missing_kernel {
  using type = no_missing_kernel;
};
template <class D, class Op, class T, class... Rest>
struct first_missing_kernel<D, expr::type_list<expr::operation<Op, T>, Rest...>> {
  using type = std::conditional_t<has_kernel_v<Op, D, T>,
                                  typename first_missing_kernel<D, expr::type_list<Rest...>>::type,
                                  expr::operation<Op, T>>;
};
template <class D, class N>
using missing_kernel_t = typename first_missing_kernel<D, typename N::operations>::type;

template <class D, class Devices>
struct first_foreign_device {
  using type = void;
};
template <class D, class X, class... Rest>
struct first_foreign_device<D, expr::type_list<X, Rest...>> {
  using type = std::conditional_t<std::is_same_v<X, D>, typename first_foreign_device<D, expr::type_list<Rest...>>::type, X>;
};
template <class Devices>
struct single_device {};
template <class D>
struct single_device<expr::type_list<D>> {
  using type = D;
};

template <class D, class N>
using foreign_device_t = typename first_foreign_device<D, typename N::devices>::type;

template <class Target, class Op, class T>
void fire_no_kernel(expr::operation<Op, T>*) {
  [[maybe_unused]] no_kernel<Target, Op, T> error;
}
template <class Op, class T>
const char* operation_type(expr::operation<Op, T>*) {
  return expr::detail::op_type<Op>();
}

// ---- the placement log ------------------------------------------------------------------------

class log_visitor {
public:
  explicit log_visitor(device_id target) : target_(target) {}
  log_visitor(const log_visitor&) = delete;
  log_visitor& operator=(const log_visitor&) = delete;
  ~log_visitor();
  void leaf(device_id d, const char* name);
  void constant();
  void op(const char* name, const char* type);

private:
  std::string numbered(const std::string& base);
  static void emit(const std::string& name, const char* type, device_id d);
  device_id target_;
  std::map<std::string, int> counts_;
};

#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE log_visitor::~log_visitor() = default;
LOCUS_RUNTIME_INLINE void log_visitor::leaf(device_id d, const char* name) {
  emit(name != nullptr ? std::string(name) : numbered("Const"), "Const", d);
}
LOCUS_RUNTIME_INLINE void log_visitor::constant() { emit(numbered("Const"), "Const", target_); }
LOCUS_RUNTIME_INLINE void log_visitor::op(const char* name, const char* type) { emit(numbered(name), type, target_); }
LOCUS_RUNTIME_INLINE std::string log_visitor::numbered(const std::string& base) {
  const int n = counts_[base]++;
  return n == 0 ? base : base + "_" + std::to_string(n);
}
LOCUS_RUNTIME_INLINE void log_visitor::emit(const std::string& name, const char* type, device_id d) {
  log_line(name + ": (" + type + "): " + log_device(d));
}
#endif

template <device D, class N>
void log_evaluation(const N& n) {
  const log_entry entry;  // the evaluate() or assign() around it has claimed it already
  if (!entry) return;
  log_visitor v(id_of<D>);
  n.visit(v);
}

// ---- evaluation -------------------------------------------------------------------------------

/// Replaces every leaf that is not on D by a copy on D (to<D>, logged).
template <device D>
struct copy_leaves_to {
  template <class L>
  auto operator()(const L& l) const {
    using T = typename L::value_type;
    if constexpr (std::is_same_v<typename L::device_type, D>) {
      return l;
    } else {
      return expr::owning_leaf<T, D, L::rank>{std::make_shared<const tensor<T, D, L::rank>>(to<D>(l.view))};
    }
  }
};

/// Visits the leaves of an expression (through rebind, returning each unchanged) and records whether
/// one shares memory with `dst` other than as the very same elements in the same shape.
template <class T, device D, int R>
struct overlap_probe {
  tensor_view<T, D, R> dst;
  bool element_for_element_ok = true;  // false: even the very same elements count as overlap
  bool partial = false;
  template <class L>
  L operator()(const L& l) {
    using U = typename L::value_type;
    if constexpr (std::is_same_v<typename L::device_type, D>) {
      const auto* lo = reinterpret_cast<const unsigned char*>(dst.data());
      const auto* hi = lo + dst.size() * sizeof(T);
      const auto* p = reinterpret_cast<const unsigned char*>(l.view.data());
      const std::size_t bytes = l.view.size() * sizeof(U);
      if (bytes != 0 && dst.size() != 0 && p < hi && lo < p + bytes) {
        bool same = element_for_element_ok && p == lo && sizeof(U) == sizeof(T);
        if constexpr (L::rank == R) same = same && l.view.shape() == dst.shape();
        else same = false;
        partial = partial || !same;
      }
    }
    return l;
  }
};

/// An elementwise node or a special expression (reduction, matrix product), ready to evaluate.
template <class E>
auto to_evaluable(E&& e) {
  if constexpr (special_expression<E>) return std::remove_cvref_t<E>(std::forward<E>(e));
  else return expr::as_node(std::forward<E>(e));
}
template <class E>
using evaluable_t = decltype(to_evaluable(std::declval<E>()));
template <class E>
concept evaluable = expr::operand<E> || special_expression<E>;

/// gpu<N>: a GPU known at compile time (not any_gpu, not the cpu).
template <class D>
concept static_gpu = D::kind == device_kind::gpu && !is_dynamic_v<D>;

/// Retags every leaf of device type D as any_gpu (the same memory; inside a device_scope of D).
template <device D>
struct leaves_as_any_gpu {
  template <class L>
  auto operator()(const L& l) const {
    if constexpr (std::is_same_v<typename L::device_type, D>)
      return expr::leaf<typename L::value_type, any_gpu, L::rank>{retag<any_gpu>(l.view)};
    else
      return l;
  }
};

/// Writes n (all leaves on D, all kernels available, no staged operands left) into dst, shapes
/// already checked; logs nothing. Below this point a GPU is any_gpu: a gpu<N> tree is retagged
/// and written inside a device_scope of gpu<N>, so that every gpu<N> shares one kernel, one
/// reduction and one product per expression (the type keeps the device for the checks above).
template <device D, class N, class T, int R>
void write_into(const N& n, const tensor_view<T, D, R>& dst) {
  static_assert(!expr::has_staged_v<N>, "locus: internal: staged operands are evaluated before the kernel");
  if constexpr (static_gpu<D>) {
    const checked_gpu_scope scope(id_of<D>);
    const leaves_as_any_gpu<D> as_any;
    write_into<any_gpu>(n.rebind(as_any), retag<any_gpu>(dst));
  } else if constexpr (special_expression<N>) {
    n.template write<D>(dst);
  } else {
    // Every operand has the result's shape: on a GPU its pointers go to CUB as inputs
    // (expr/direct.hpp). Otherwise the kernel reads by index: rank 2 in row tiles on the host.
    if constexpr (!backend::runs_on_host<D> && expr::direct::capable<N>) {
      if (!backend::detail::prefer_index_kernels) {
        backend::transform_inputs<D>(dst.size(), expr::direct::inputs(n), expr::direct::function(n), dst.data());
        return;
      }
    }
    if constexpr (R == 2)
      backend::transform_rows<D>(dst.extent(0), dst.extent(1),
                                 expr::row_kernel<std::remove_cvref_t<decltype(n.kernel())>>{n.kernel()}, dst.data());
    else
      backend::transform<D>(dst.size(), n.kernel(), dst.data());
  }
}

/// Replaces every staged operand (expr::staged: a product or reduction inside an elementwise
/// expression, an expression inside a product) by a temporary on Run holding its value, innermost
/// first. The steps are not logged here: the log of the whole tree already shows each of them.
template <device Run>
struct stage_operands {
  template <class L>
  L operator()(const L& l) const {
    return l;
  }
  template <class S>
  auto materialize(const S& s) const {
    auto inner = s.rebind(*this);
    using I = decltype(inner);
    using T = typename I::value_type;
    auto out = std::make_shared<tensor<T, Run, I::rank>>(tensor<T, Run, I::rank>::uninitialized_of(inner.shape()));
    write_into<Run>(inner, out->view());
    return expr::owning_leaf<T, Run, I::rank>{std::move(out)};
  }
};

/// f(n), or f(the tree over temporaries) when n has staged operands: they are evaluated first, on D.
template <device D, class N, class F>
decltype(auto) with_staged(const N& n, F&& f) {
  if constexpr (expr::has_staged_v<N>) {
    const stage_operands<D> stage;
    return f(n.rebind(stage));
  } else {
    return f(n);
  }
}

/// Logs n, then writes it into dst (its staged operands first).
template <device D, class N, class T, int R>
void launch_into(const N& n, const tensor_view<T, D, R>& dst) {
  log_evaluation<D>(n);
  with_staged<D>(n, [&](const auto& m) { write_into<D>(m, dst); });
}

[[noreturn]] LOCUS_RUNTIME_INLINE void throw_destination_mismatch(const std::string& destination,
                                                                  const std::string& expression);
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_empty_rank0_view();
#if LOCUS_RUNTIME_DEFINITIONS
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_destination_mismatch(const std::string& destination,
                                                                  const std::string& expression) {
  throw shape_error("locus: assignment: the destination has shape " + destination + ", the expression " + expression);
}
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_empty_rank0_view() {
  throw shape_error("locus: assignment into an empty rank-0 view (of a default-constructed or moved-from tensor): "
                    "assign the tensor itself");
}
#endif

template <class N>
void check_destination_shape(const N& n, const auto& dst_shape) {
  if (!(n.shape() == dst_shape)) throw_destination_mismatch(dst_shape.str(), n.shape().str());
}

/// Which device node N runs on under Policy when bound to D, and whether it is allowed.
template <device D, class Policy, class N>
struct placement_of {
  using missing = missing_kernel_t<D, N>;
  static constexpr bool kernels_ok = std::is_same_v<missing, no_missing_kernel>;
  static constexpr bool soft_fallback = !kernels_ok && std::is_same_v<Policy, soft_placement>;
  using device = std::conditional_t<soft_fallback, cpu, D>;
  using foreign = foreign_device_t<D, N>;
  static constexpr bool devices_ok = std::is_void_v<foreign> || std::is_same_v<Policy, implicit_transfers>;
  static constexpr bool ok = devices_ok && (kernels_ok || soft_fallback);

  /// Fires the one static_assert that explains why the placement is rejected.
  static void diagnose() {
    if constexpr (!devices_ok) {
      [[maybe_unused]] misplaced_operand<foreign, D> error;
    } else if constexpr (!kernels_ok && !soft_fallback) {
      fire_no_kernel<D>(static_cast<missing*>(nullptr));
    }
  }
};

template <device Run, class N>
auto run(const N& n) {
  auto out = tensor<typename N::value_type, Run, N::rank>::uninitialized_of(n.shape());
  launch_into<Run>(n, out.view());
  return out;
}

template <device D, class Policy, class N>
auto evaluate(const N& n) {
  using P = placement_of<D, Policy, N>;
  if constexpr (!P::ok) {
    P::diagnose();
    return tensor<typename N::value_type, D, N::rank>{};
  } else {
    using Run = typename P::device;
    backend::registry::instance().require(id_of<D>);
    const log_entry entry;  // the notice, the copies and the nodes: one evaluation of the log
    if constexpr (P::soft_fallback) {
      if (entry)
        log_line(std::string("soft placement: ") + operation_type(static_cast<typename P::missing*>(nullptr)) +
                 " has no kernel for " + log_device(id_of<D>) + "; running on " + log_device(id_of<cpu>));
    }
    if constexpr (std::is_same_v<Run, D> && std::is_void_v<typename P::foreign> && static_gpu<D>) {
      // Below the typed surface a GPU is any_gpu: one run per expression for every gpu<N>.
      const checked_gpu_scope scope(id_of<D>);
      const leaves_as_any_gpu<D> as_any;
      return adopt<D>(run<any_gpu>(n.rebind(as_any)));
    } else if constexpr (std::is_same_v<Run, D> && std::is_void_v<typename P::foreign>) {
      return run<Run>(n);
    } else {
      copy_leaves_to<Run> copy;
      return run<Run>(n.rebind(copy));
    }
  }
}

/// The run-time part of an assignment: n (shapes checked) into out, through a temporary when an
/// operand overlaps out other than element for element; operands on other devices are copied to
/// D first (implicit_transfers). Logged as one evaluation.
template <class T, device D, int R, class N>
void write_view(const tensor_view<T, D, R>& out, const N& n) {
  const log_entry entry;  // the copies implicit_transfers makes and the nodes: one evaluation
  // An operand that shares memory with the destination other than element for element (a shifted
  // view, a row broadcast over its own matrix) would read values the kernel already overwrote:
  // such an expression is evaluated into a temporary first. `a = a + b` stays in place.
  // Staged operands (a product inside the expression) are evaluated into temporaries first, so
  // the probe sees what the final kernel reads.
  const auto write = [&](const auto& staged_tree) {
    log_evaluation<D>(staged_tree);
    with_staged<D>(staged_tree, [&](const auto& m) {
      using M = std::remove_cvref_t<decltype(m)>;
      if constexpr (!requires { M::accumulates; }) {  // matmul checks its own operands
        // A reduction reads other elements than the one it writes: any shared memory counts.
        // So does a slice or concat (it reads other indices than it writes).
        overlap_probe<T, D, R> probe{out, !special_expression<M> && !expr::has_gather_v<M>};
        (void)m.rebind(probe);
        if (probe.partial) {
          auto tmp = tensor<T, D, R>::uninitialized_of(out.shape());
          write_into<D>(m, tmp.view());
          backend::copy(id_of<D>, out.data(), id_of<D>, tmp.data(), out.size() * sizeof(T));
          return;
        }
      }
      write_into<D>(m, out);
    });
  };
  if constexpr (std::is_void_v<foreign_device_t<D, N>>) {
    write(n);
  } else {
    copy_leaves_to<D> copy;
    write(n.rebind(copy));
  }
}

template <class Policy, class Dst, class E>
void assign(Dst& dst, E&& e) {
  auto n = to_evaluable(std::forward<E>(e));
  using N = decltype(n);
  using D = typename Dst::device_type;
  using T = typename Dst::value_type;
  using P = placement_of<D, Policy, N>;
  if constexpr (N::rank != Dst::rank) {
    static_assert(N::rank == Dst::rank, "locus: assignment: the expression's rank differs from the destination's");
  } else if constexpr (!std::is_same_v<typename N::value_type, T>) {
    static_assert(std::is_same_v<typename N::value_type, T>,
                  "locus: assignment: the expression's element type differs from the destination's; convert "
                  "explicitly with locus::cast<T>(expr)");
  } else if constexpr (!P::ok || P::soft_fallback) {
    P::diagnose();
  } else {
    backend::registry::instance().require(id_of<D>);
    // An empty tensor takes the expression's shape: the value is written into a fresh tensor (named
    // like dst) that replaces dst only once the evaluation succeeded, so an evaluation that throws
    // (a functor, a shape error inside a product, a device failure) leaves dst empty, not resized
    // over uninitialised elements.
    std::optional<Dst> fresh;
    if constexpr (is_tensor<Dst>::value) {
      if (dst.size() == 0 && (!(n.shape() == dst.shape()) || n.shape().size() != 0)) {
        fresh.emplace(Dst::uninitialized_of(n.shape()));
        fresh->set_name(dst.name());
      }
    }
    tensor_view<T, D, Dst::rank> out;
    if constexpr (is_tensor<Dst>::value) out = fresh ? fresh->view() : dst.view();
    else out = dst;
    check_destination_shape(n, out.shape());
    if (out.size() != n.shape().size()) throw_empty_rank0_view();  // a rank-0 view of an empty rank-0 tensor
    if constexpr (std::is_void_v<typename P::foreign> && static_gpu<D>) {
      // Below the typed surface a GPU is any_gpu: one writer per expression for every gpu<N>.
      const checked_gpu_scope scope(id_of<D>);
      const leaves_as_any_gpu<D> as_any;
      write_view(retag<any_gpu>(out), n.rebind(as_any));
    } else {
      write_view(out, n);
    }
    if constexpr (is_tensor<Dst>::value)
      if (fresh) dst = std::move(*fresh);  // noexcept: dst is whole, old or new
  }
}

/// dst += e: elementwise `dst = dst + e` (a reduction is staged: `t += sum<0>(m)`); a product
/// accumulates in place (BLAS beta = 1).
template <class Policy, class Dst, class E>
void accumulate(Dst& dst, E&& e) {
  if constexpr (special_expression<E> && requires { std::remove_cvref_t<E>::accumulates; }) {
    // An empty destination has nothing to accumulate onto: assigning it would add the product to
    // whatever the arena's recycled block held.
    if (dst.size() == 0 && !(e.shape() == dst.shape()))
      throw shape_error("locus: C += matmul(A, B): C is empty; assign it first (C = matmul(A, B)), the product has "
                        "shape " + e.shape().str());
    assign<Policy>(dst, std::remove_cvref_t<E>(std::forward<E>(e)).accumulating());
  } else {
    if (dst.size() == 0)
      throw shape_error("locus: t += expr: t is empty; assign it first");
    assign<Policy>(dst, dst.view() + std::forward<E>(e));
  }
}

}  // namespace detail

/// Evaluates expr on device D as one fused kernel; the result lives on D (on the cpu when
/// Policy is soft_placement and an operation has no kernel for D). See placement/policy.hpp.
template <class D, class Policy = strict, class E>
[[nodiscard]] auto on(E&& e) {
  if constexpr (!device<D>) {
    static_assert(device<D>, "locus: on<D>(expr): D must be a device tag, locus::cpu or locus::gpu<N>");
  } else if constexpr (!detail::is_policy<Policy>) {
    static_assert(detail::is_policy<Policy>,
                  "locus: on<D, Policy>(expr): Policy must be locus::strict, locus::soft_placement or "
                  "locus::implicit_transfers");
  } else if constexpr (!detail::evaluable<E>) {
    static_assert(detail::evaluable<E>, "locus: on<D>(expr): expr must be a locus tensor, tensor_view or expression");
  } else {
    return detail::evaluate<D, Policy>(detail::to_evaluable(std::forward<E>(e)));
  }
}

/// Evaluates expr where all of its operands live; does not compile when they live on several devices.
template <detail::evaluable E>
[[nodiscard]] auto eval(E&& e) {
  using N = detail::evaluable_t<E>;
  using Devices = typename N::devices;
  if constexpr (!requires { typename detail::single_device<Devices>::type; }) {
    [[maybe_unused]] detail::mixed_devices<Devices> error;
    return tensor<typename N::value_type, cpu, N::rank>{};  // stops the cascade
  } else {
    return on<typename detail::single_device<Devices>::type>(std::forward<E>(e));
  }
}

}  // namespace locus
