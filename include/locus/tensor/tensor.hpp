#pragma once
// tensor<T, Device, Rank>: owning, row-major storage on one device; tensor_view: pointer + shape.
//
// Semantics: a tensor is move-only. Copying device memory is never implicit: `clone()` copies on
// the same device, `to<D>(t)` copies to another, and `c = expr` writes into c's own storage.
// Storage comes from the device's caching arena (backend/caching_allocator.hpp).
//
// Element access `t(i, j)` exists only for tensors (and views) on the cpu; GPU data reaches the host
// through `to_vector()` or `to<cpu>(t)`.
//
// Views of part of a tensor, on its device: `t.row(i)` (rank - 1) and `t.rows(first, last)` (same
// rank) here; slice<0>(t, first, last) and reshape(t, shape) in tensor/slice.hpp. Row-major storage
// makes each of them contiguous: a view is a pointer and a shape, without strides.
#include <locus/backend/memory.hpp>
#include <locus/backend/parallel.hpp>
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/tensor/shape.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <memory>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace locus {

struct strict;
template <class T, device D, int Rank>
class tensor;
template <class T, device D, int Rank>
class tensor_view;

namespace detail {
/// Expression nodes (locus/expr) announce themselves with a member type `locus_node`.
template <class E>
concept expression_node = requires { typename std::remove_cvref_t<E>::locus_node; };
/// Reductions and matrix products (locus/ops) announce themselves with `locus_special`: they are
/// evaluated by the device's own routine rather than as an elementwise kernel.
template <class E>
concept special_expression = requires { typename std::remove_cvref_t<E>::locus_special; };
template <class E>
concept assignable_expression = expression_node<E> || special_expression<E>;

/// Defined in <locus/placement/on.hpp> (included by <locus/locus.hpp>): `dst = e`, checked as
/// on<D, Policy>(e). An empty dst takes e's shape; otherwise the shapes must be equal.
template <class Policy, class Dst, class E>
void assign(Dst& dst, E&& e);
template <class Policy, class Dst, class E>
void accumulate(Dst& dst, E&& e);

template <class T>
struct is_tensor : std::false_type {};
template <class T, class D, int R>
struct is_tensor<tensor<T, D, R>> : std::true_type {};
template <class T>
struct is_tensor_view : std::false_type {};
template <class T, class D, int R>
struct is_tensor_view<tensor_view<T, D, R>> : std::true_type {};

struct tensor_access;

/// The errors of a tensor's construction, compiled once (the run-time part), not per tensor type.
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_extents_overflow(device_id d, const std::string& extents, bool in_bytes);
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_host_range_mismatch(const std::string& shape, std::size_t needed,
                                                                 std::size_t given);
#if LOCUS_RUNTIME_DEFINITIONS
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_extents_overflow(device_id d, const std::string& extents, bool in_bytes) {
  throw allocation_error(d.full_name(), std::numeric_limits<std::size_t>::max(),
                         "the extents " + extents + (in_bytes ? " need more bytes than size_t can count"
                                                             : " overflow size_t"));
}
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_host_range_mismatch(const std::string& shape, std::size_t needed,
                                                                 std::size_t given) {
  throw shape_error("locus: tensor of shape " + shape + " needs " + std::to_string(needed) +
                    " elements, the host range has " + std::to_string(given));
}
#endif

/// Element count of a shape; throws before anything is allocated when it overflows.
template <int R>
std::size_t checked_elements(const shape<R>& s, std::size_t element_size, device_id d) {
  if (s.size_overflows()) throw_extents_overflow(d, s.str(), false);
  const std::size_t n = s.size();
  if (n != 0 && n > std::numeric_limits<std::size_t>::max() / element_size) throw_extents_overflow(d, s.str(), true);
  return n;
}

/// A tensor's storage: elements from the arena of the device it was allocated on (kept: a tensor
/// of the run-time GPU type any_gpu frees into its own GPU's arena, wherever it is destroyed). A
/// borrowed buffer views another's storage for the length of a call and frees nothing.
template <class T, device D>
class device_buffer {
public:
  device_buffer() noexcept = default;
  explicit device_buffer(std::size_t n) : device_(id_of<D>) {
    p_ = static_cast<T*>(backend::allocate(device_, n * sizeof(T)));
    n_ = n;
  }
  /// n elements at p on device d, not owned.
  static device_buffer borrowed(T* p, std::size_t n, device_id d) noexcept {
    device_buffer b;
    b.p_ = p;
    b.n_ = n;
    b.device_ = d;
    b.owns_ = false;
    return b;
  }
  /// Takes o's storage (a buffer of another device type for the same device: detail::adopt).
  template <locus::device D2>
  explicit device_buffer(device_buffer<T, D2>&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)), device_(o.device_), owns_(o.owns_) {}
  device_buffer(device_buffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)), device_(o.device_), owns_(o.owns_) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
      device_ = o.device_;
      owns_ = o.owns_;
    }
    return *this;
  }
  ~device_buffer() { release(); }
  [[nodiscard]] T* data() const noexcept { return p_; }
  [[nodiscard]] std::size_t size() const noexcept { return n_; }
  [[nodiscard]] device_id device() const noexcept { return device_; }

private:
  template <class T2, locus::device D2>
  friend class device_buffer;
  void release() noexcept {
    if (p_ != nullptr && owns_) backend::deallocate(device_, p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  std::size_t n_ = 0;
  device_id device_{};
  bool owns_ = true;
};

/// The row-major offset of an index; unchecked, like std::mdspan's operator[].
template <int R, class... I>
constexpr std::size_t row_major_offset(const shape<R>& s, I... idx) noexcept {
  if constexpr (sizeof...(I) == 0) {
    return 0;  // rank 0: t()
  } else {
    const std::size_t is[] = {static_cast<std::size_t>(idx)...};
    std::size_t o = 0;
    for (std::size_t k = 0; k < sizeof...(I); ++k) o = o * s[k] + is[k];
    return o;
  }
}

/// The one message for element access on a GPU (tensors and views alike).
template <device D>
constexpr void require_host_element_access() {
  static_assert(std::same_as<D, cpu>,
                "locus: element access t(i, ...) is for cpu tensors; bring GPU data to the host first with "
                "locus::to<locus::cpu>(t) or t.to_vector()");
}

/// i as an index below `extent`, or false when it is negative or too large.
template <std::integral I>
constexpr bool index_in(I i, std::size_t extent, std::size_t& out) noexcept {
  if constexpr (std::is_signed_v<I>)
    if (i < 0) return false;
  out = static_cast<std::size_t>(i);
  return out < extent;
}

/// The elements of one sub-tensor of axis 0 (one row of a matrix), contiguous in row-major order.
template <int R>
constexpr std::size_t row_stride(const shape<R>& s) noexcept {
  std::size_t n = 1;
  for (std::size_t d = 1; d < static_cast<std::size_t>(R); ++d) n *= s[d];
  return n;
}

/// Rows [first, last) of v, a view of the same rank; `what` names the call in the message
/// (t.rows(first, last), slice<0>(t, first, last)).
template <class View, std::integral I, std::integral J>
View rows_of(const View& v, I first, J last, const char* what) {
  std::size_t a = 0, b = 0;
  const std::size_t n = v.extent(0);
  if (!index_in(first, n + 1, a) || !index_in(last, n + 1, b) || a > b)
    throw shape_error(std::string("locus: ") + what + "(" + std::to_string(first) + ", " + std::to_string(last) +
                      "): not a range of rows of shape " + v.shape().str() + " (0 <= first <= last <= " +
                      std::to_string(n) + ")");
  auto s = v.shape();
  s.extents[0] = b - a;
  return View(v.data() + a * row_stride(v.shape()), s, v.name());
}

/// Host copy of n elements of device memory; std::vector<bool> has no data(), hence the detour.
template <class T, device D>
std::vector<T> copy_to_host(const T* p, std::size_t n) {
  if constexpr (std::is_same_v<T, bool>) {
    auto tmp = std::make_unique<bool[]>(n);
    backend::copy(id_of<cpu>, tmp.get(), id_of<D>, p, n);
    return std::vector<bool>(tmp.get(), tmp.get() + n);
  } else {
    std::vector<T> out(n);
    backend::copy(id_of<cpu>, out.data(), id_of<D>, p, n * sizeof(T));
    return out;
  }
}
}  // namespace detail

/// A non-owning view: pointer, shape and (optional) name. Regular type: copying a view copies the
/// reference, like std::span; `v = expr` writes the expression's values into the viewed elements.
template <class T, device D, int Rank = 1>
class tensor_view {
public:
  using value_type = std::remove_const_t<T>;
  using element_type = T;
  using device_type = D;
  static constexpr int rank = Rank;

  constexpr tensor_view() noexcept = default;
  /// Unchecked: the caller promises p points to shape.size() elements on D. See make_view().
  constexpr tensor_view(T* p, locus::shape<Rank> s, const char* name = nullptr) noexcept
      : p_(p), shape_(s), name_(name) {}
  constexpr tensor_view(const tensor_view&) noexcept = default;
  /// Rebinds the view (like std::span).
  constexpr tensor_view& operator=(const tensor_view&) & noexcept = default;
  /// `t.row(1) = t.row(0)` would rebind a temporary and write nothing: write t.row(1) = copy(t.row(0)).
  tensor_view& operator=(const tensor_view&) && = delete;

  /// A view of mutable elements converts to a view of const ones.
  template <class U>
    requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>)
  constexpr tensor_view(const tensor_view<U, D, Rank>& o) noexcept  // NOLINT(implicit)
      : p_(o.data()), shape_(o.shape()), name_(o.name()) {}

  /// Writes e into the viewed elements (checked as on<D>(e); the shapes must be equal). An operand
  /// that shares memory with the view other than element for element is read into a temporary first.
  template <detail::assignable_expression E>
    requires(!std::is_const_v<T>)
  const tensor_view& operator=(E&& e) const {
    auto self = *this;
    detail::assign<strict>(self, std::forward<E>(e));
    return *this;
  }
  /// `v = t` (a tensor) or `v = u` (a view it cannot rebind to): element copies are explicit.
  template <class X>
    requires(detail::is_tensor<std::remove_cvref_t<X>>::value ||
             (detail::is_tensor_view<std::remove_cvref_t<X>>::value && !std::is_convertible_v<X, tensor_view>))
  const tensor_view& operator=(X&&) const {
    static_assert(!std::is_same_v<X, X>,
                  "locus: view = tensor or view: element copies are explicit; write the elements with v = copy(x)");
    return *this;
  }

  [[nodiscard]] constexpr T* data() const noexcept { return p_; }
  [[nodiscard]] constexpr const locus::shape<Rank>& shape() const noexcept { return shape_; }
  /// shape().size(); a rank-0 view of no storage (of an empty rank-0 tensor) has none.
  [[nodiscard]] constexpr std::size_t size() const noexcept {
    if constexpr (Rank == 0) return p_ == nullptr ? 0 : 1;
    else return shape_.size();
  }
  [[nodiscard]] constexpr std::size_t extent(std::size_t i) const noexcept { return shape_[i]; }
  [[nodiscard]] constexpr const char* name() const noexcept { return name_; }
  [[nodiscard]] std::vector<value_type> to_vector() const { return detail::copy_to_host<value_type, D>(p_, size()); }

  /// Row i: the sub-tensor at index i of axis 0, a view of rank Rank - 1 into the same elements.
  /// Throws shape_error naming the shape and the index when i is out of range.
  template <std::integral I>
  [[nodiscard]] auto row(I i) const {
    if constexpr (Rank == 0) {
      static_assert(Rank > 0, "locus: row(i): a rank-0 tensor has no rows");
      return *this;
    } else {
      std::size_t r = 0;
      if (!detail::index_in(i, shape_[0], r))
        throw shape_error("locus: row(" + std::to_string(i) + "): index out of range for shape " + shape_.str() +
                          (shape_[0] == 0 ? " (no rows)" : " (rows 0 to " + std::to_string(shape_[0] - 1) + ")"));
      locus::shape<Rank - 1> s;
      for (std::size_t d = 1; d < static_cast<std::size_t>(Rank); ++d) s.extents[d - 1] = shape_[d];
      return tensor_view<T, D, Rank - 1>(p_ + r * detail::row_stride(shape_), s, name_);
    }
  }
  /// Rows [first, last): a view of the same rank (first == last: an empty one). Throws shape_error
  /// naming the shape and the range unless 0 <= first <= last <= extent(0).
  template <std::integral I, std::integral J>
  [[nodiscard]] tensor_view rows(I first, J last) const {
    if constexpr (Rank == 0) {
      static_assert(Rank > 0, "locus: rows(first, last): a rank-0 tensor has no rows");
      return *this;
    } else {
      return detail::rows_of(*this, first, last, "rows");
    }
  }

  /// Host element access, cpu views only (unchecked, like tensor's).
  template <class... I>
    requires(sizeof...(I) == static_cast<std::size_t>(Rank) && (std::is_integral_v<I> && ...))
  [[nodiscard]] T& operator()(I... idx) const noexcept {
    detail::require_host_element_access<D>();
    return p_[detail::row_major_offset(shape_, idx...)];
  }

  /// Every viewed element becomes x (one fill kernel).
  void fill(value_type x) const
    requires(!std::is_const_v<T>)
  {
    backend::fill<D>(size(), x, p_);
  }

private:
  T* p_ = nullptr;
  locus::shape<Rank> shape_{};
  const char* name_ = nullptr;
};

/// A checked view of device memory: throws device_error when p belongs to another device's arena
/// (a gpu<1> pointer viewed as gpu<0> memory, or GPU memory viewed as cpu memory).
template <device D, class T, int R>
[[nodiscard]] tensor_view<T, D, R> make_view(T* p, shape<R> s) {
  if (s.size_overflows() || s.size() > std::numeric_limits<std::size_t>::max() / sizeof(T))
    detail::throw_too_many_elements("make_view<" + id_of<D>.type_name() + ">", s.str(), !s.size_overflows());
  if (s.size() != 0 && !backend::owns(id_of<D>, p))
    throw device_error("locus: make_view<" + id_of<D>.type_name() + ">: the pointer does not belong to " +
                       id_of<D>.full_name() + "'s memory");
  return tensor_view<T, D, R>(p, s);
}

template <class T, device D = default_device, int Rank = 1>
class tensor {
  static_assert(Rank >= 0, "locus: a tensor has rank 0 or more");
  static_assert(std::is_trivially_copyable_v<T> && !std::is_const_v<T> && !std::is_reference_v<T>,
                "locus: tensor elements must be non-const, trivially copyable types: they are copied between "
                "devices byte by byte");

public:
  using value_type = T;
  using device_type = D;
  static constexpr int rank = Rank;

  /// An empty tensor (size 0); it takes the shape of the first expression assigned to it.
  tensor() noexcept = default;

  /// A tensor of the given shape, every element `fill` (one fill kernel).
  explicit tensor(locus::shape<Rank> s, T fill = T{}) : shape_(s) {
    buf_ = detail::device_buffer<T, D>(detail::checked_elements(s, sizeof(T), id_of<D>));
    backend::fill<D>(buf_.size(), fill, buf_.data());
  }

  /// tensor<float, cpu> a{1.f, 2.f, 3.f}
  tensor(std::initializer_list<T> values)
    requires(Rank == 1)
      : tensor(locus::shape<1>{values.size()}, std::span<const T>(values.begin(), values.size()), uninitialized) {}

  /// tensor<float, cpu, 2> m{{1.f, 2.f}, {3.f, 4.f}}; ragged rows throw shape_error.
  tensor(std::initializer_list<std::initializer_list<T>> rows)
    requires(Rank == 2)
  {
    const std::size_t cols = rows.size() == 0 ? 0 : rows.begin()->size();
    const auto flat = std::make_unique<T[]>(rows.size() * cols);  // not std::vector: vector<bool> has no data()
    std::size_t r = 0;
    for (const auto& row : rows) {
      if (row.size() != cols)
        throw shape_error("locus: tensor from nested lists: row " + std::to_string(r) + " has " +
                          std::to_string(row.size()) + " elements, row 0 has " + std::to_string(cols));
      std::copy(row.begin(), row.end(), flat.get() + r * cols);
      ++r;
    }
    *this = tensor(locus::shape<2>{rows.size(), cols}, std::span<const T>(flat.get(), rows.size() * cols), uninitialized);
  }

  /// Copies a host range of exactly s.size() elements; throws shape_error otherwise.
  template <std::ranges::contiguous_range Range>
    requires std::is_same_v<std::remove_cv_t<std::ranges::range_value_t<Range>>, T>
  tensor(locus::shape<Rank> s, const Range& host)
      : tensor(s, std::span<const T>(std::ranges::data(host), std::ranges::size(host)), uninitialized) {}

  /// Rank 1 from a host range: tensor<float, gpu<0>> x(std::vector<float>{...}).
  template <std::ranges::contiguous_range Range>
    requires(Rank == 1 && std::is_same_v<std::remove_cv_t<std::ranges::range_value_t<Range>>, T> &&
             !detail::is_tensor<std::remove_cvref_t<Range>>::value)
  explicit tensor(const Range& host) : tensor(locus::shape<1>{std::ranges::size(host)}, host) {}

  /// Evaluates an expression on D (checked exactly as on<D>(e)).
  template <detail::assignable_expression E>
  tensor(E&& e) {  // NOLINT(google-explicit-constructor): `tensor<float, cpu> c = a + b;` is the point
    detail::assign<strict>(*this, std::forward<E>(e));
  }
  /// Writes an expression into this tensor's storage (checked as on<D>(e)). An empty tensor takes
  /// the expression's shape; otherwise the shapes must be equal (shape_error, nothing written).
  template <detail::assignable_expression E>
  tensor& operator=(E&& e) {
    detail::assign<strict>(*this, std::forward<E>(e));
    return *this;
  }
  /// t += e: `t = t + e` for elementwise expressions (one kernel); accumulates into t for
  /// matrix products (`C += matmul(A, B)`, BLAS beta = 1).
  template <detail::assignable_expression E>
  tensor& operator+=(E&& e) {
    detail::accumulate<strict>(*this, std::forward<E>(e));
    return *this;
  }

  /// A moved-from tensor is empty (shape all zeros, no storage, no name).
  tensor(tensor&& o) noexcept
      : buf_(std::move(o.buf_)), shape_(std::exchange(o.shape_, locus::shape<Rank>{})), name_(std::move(o.name_)) {
    o.name_.clear();
  }
  tensor& operator=(tensor&& o) noexcept {
    if (this != &o) {
      buf_ = std::move(o.buf_);
      shape_ = std::exchange(o.shape_, locus::shape<Rank>{});
      name_ = std::move(o.name_);
      o.name_.clear();
    }
    return *this;
  }
  tensor(const tensor&) = delete;             // copies are explicit: clone() or to<D>(t)
  tensor& operator=(const tensor&) = delete;  // element copies are explicit: t = copy(u)
  ~tensor() = default;

  /// A deep copy on the same device.
  [[nodiscard]] tensor clone() const {
    if constexpr (Rank == 0)
      if (empty()) return tensor{};  // an empty rank-0 tensor clones to an empty one
    tensor t(shape_, uninitialized);
    backend::copy(id_of<D>, t.data(), id_of<D>, data(), size() * sizeof(T));
    t.name_ = name_;
    return t;
  }

  [[nodiscard]] T* data() noexcept { return buf_.data(); }
  [[nodiscard]] const T* data() const noexcept { return buf_.data(); }
  [[nodiscard]] const locus::shape<Rank>& shape() const noexcept { return shape_; }
  /// The number of elements held: shape().size(), except for a rank-0 tensor without storage
  /// (default-constructed or moved-from), which holds none and is empty until assigned.
  [[nodiscard]] std::size_t size() const noexcept {
    if constexpr (Rank == 0) return buf_.data() == nullptr ? 0 : 1;
    else return shape_.size();
  }
  [[nodiscard]] std::size_t extent(std::size_t i) const noexcept { return shape_[i]; }
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }

  [[nodiscard]] tensor_view<T, D, Rank> view() noexcept { return {data(), shape_, name_ptr()}; }
  [[nodiscard]] tensor_view<const T, D, Rank> view() const noexcept { return {data(), shape_, name_ptr()}; }

  /// The values, copied to the host.
  [[nodiscard]] std::vector<T> to_vector() const { return detail::copy_to_host<T, D>(data(), size()); }

  /// Names appear in the placement log ("a: (Const): ...").
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  tensor& set_name(std::string n) & {
    name_ = std::move(n);
    return *this;
  }
  [[nodiscard]] tensor named(std::string n) && {
    name_ = std::move(n);
    return std::move(*this);
  }

  /// The one element of a size-1 tensor (a reduction's result), copied to the host.
  [[nodiscard]] T item() const {
    if (size() != 1)
      throw shape_error("locus: item() needs a tensor of one element, this one " +
                        (Rank == 0 ? std::string("is empty (default-constructed or moved-from)")
                                   : "has shape " + shape_.str()));
    return to_vector()[0];
  }

  /// Every element becomes v (one fill kernel).
  void fill(T v) { backend::fill<D>(size(), v, data()); }

  /// Host element access, cpu tensors only (unchecked); on a GPU one static_assert says what to do.
  template <class... I>
    requires(sizeof...(I) == static_cast<std::size_t>(Rank) && (std::is_integral_v<I> && ...))
  [[nodiscard]] T& operator()(I... idx) noexcept {
    detail::require_host_element_access<D>();
    return buf_.data()[detail::row_major_offset(shape_, idx...)];
  }
  template <class... I>
    requires(sizeof...(I) == static_cast<std::size_t>(Rank) && (std::is_integral_v<I> && ...))
  [[nodiscard]] const T& operator()(I... idx) const noexcept {
    detail::require_host_element_access<D>();
    return buf_.data()[detail::row_major_offset(shape_, idx...)];
  }

  /// Row i, a view of rank Rank - 1 on D into this tensor's elements (see tensor_view::row); an
  /// operand of expressions and a destination (`t.row(0) = t.row(1) * 2.f`).
  template <std::integral I>
  [[nodiscard]] auto row(I i) & {
    return view().row(i);
  }
  template <std::integral I>
  [[nodiscard]] auto row(I i) const& {
    return view().row(i);
  }
  template <std::integral I>
  auto row(I i) && {
    static_assert(!std::is_same_v<I, I>, "locus: row(i) of a temporary tensor would dangle: a view does not own its "
                                         "elements; keep the tensor in a variable");
    return view().row(i);
  }
  /// Rows [first, last), a view of the same rank (see tensor_view::rows).
  template <std::integral I, std::integral J>
  [[nodiscard]] tensor_view<T, D, Rank> rows(I first, J last) & {
    return view().rows(first, last);
  }
  template <std::integral I, std::integral J>
  [[nodiscard]] tensor_view<const T, D, Rank> rows(I first, J last) const& {
    return view().rows(first, last);
  }
  template <std::integral I, std::integral J>
  tensor_view<T, D, Rank> rows(I first, J last) && {
    static_assert(!std::is_same_v<I, I>, "locus: rows(first, last) of a temporary tensor would dangle: a view does "
                                         "not own its elements; keep the tensor in a variable");
    return view().rows(first, last);
  }

private:
  template <class T2, device D2, int R2>
  friend class tensor;
  friend struct detail::tensor_access;
  struct uninitialized_t {};
  static constexpr uninitialized_t uninitialized{};

  tensor(locus::shape<Rank> s, uninitialized_t)
      : buf_(detail::checked_elements(s, sizeof(T), id_of<D>)), shape_(s) {}
  tensor(locus::shape<Rank> s, std::span<const T> host, uninitialized_t) : shape_(s) {
    const std::size_t n = detail::checked_elements(s, sizeof(T), id_of<D>);
    if (host.size() != n) detail::throw_host_range_mismatch(s.str(), n, host.size());
    buf_ = detail::device_buffer<T, D>(n);
    backend::copy(id_of<D>, buf_.data(), id_of<cpu>, host.data(), n * sizeof(T));
  }

  tensor(detail::device_buffer<T, D>&& b, locus::shape<Rank> s, std::string name) noexcept
      : buf_(std::move(b)), shape_(s), name_(std::move(name)) {}

  const char* name_ptr() const noexcept { return name_.empty() ? nullptr : name_.c_str(); }

  detail::device_buffer<T, D> buf_;
  locus::shape<Rank> shape_{};
  std::string name_;

public:
  /// Internal: an uninitialised tensor for results about to be overwritten by a kernel.
  [[nodiscard]] static tensor uninitialized_of(locus::shape<Rank> s) { return tensor(s, uninitialized); }
};

namespace detail {
/// The device a tensor or view of device type From is on, compared with To's (the same device,
/// under two device types: a gpu<N> and any_gpu, inside a device_scope of gpu<N>). Throws
/// device_error naming both otherwise.
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_retag_mismatch(device_id from, device_id to);
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_retag_foreign(device_id to);
#if LOCUS_RUNTIME_DEFINITIONS
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_retag_foreign(device_id to) {
  throw device_error("locus: internal: memory that is not " + to.full_name() + "'s taken as " + to.full_name() +
                     "'s (a view of the run-time GPU type any_gpu read in another GPU's device_scope)");
}
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_retag_mismatch(device_id from, device_id to) {
  throw device_error("locus: internal: memory of " + from.full_name() + " taken as " + to.full_name() +
                     " (the run-time GPU type is the current device_scope's GPU)");
}
#endif
template <device To, device From>
void check_same_device(device_id from) {
  static_assert(To::kind == From::kind, "locus: internal: a device type retagged to another kind of device");
  if constexpr (!std::is_same_v<To, From>) {
    const device_id to = id_of<To>;
    if (to != from) throw_retag_mismatch(from, to);
  }
}

/// Moves storage between the typed surface and the code below it (gpu<N> <-> any_gpu).
struct tensor_access {
  template <device To, class T, device From, int R>
  static tensor<T, To, R> borrow(const tensor<T, From, R>& t) {
    if (t.data() == nullptr) return tensor<T, To, R>(device_buffer<T, To>{}, t.shape(), t.name());
    check_same_device<To, From>(t.buf_.device());
    return tensor<T, To, R>(device_buffer<T, To>::borrowed(const_cast<T*>(t.data()), t.buf_.size(), t.buf_.device()),
                            t.shape(), t.name());
  }
  template <device To, class T, device From, int R>
  static tensor<T, To, R> adopt(tensor<T, From, R>&& t) {
    if (t.data() != nullptr) check_same_device<To, From>(t.buf_.device());
    const auto s = std::exchange(t.shape_, locus::shape<R>{});
    return tensor<T, To, R>(device_buffer<T, To>(std::move(t.buf_)), s, std::move(t.name_));
  }
};

/// t's elements as a tensor of device type To for the length of a call (not owned: t must outlive
/// it): a gpu<N> tensor handed to code compiled for any_gpu, inside a device_scope of gpu<N>.
template <device To, class T, device From, int R>
[[nodiscard]] tensor<T, To, R> borrow(const tensor<T, From, R>& t) {
  return tensor_access::borrow<To>(t);
}
/// t's storage, moved into a tensor of device type To (the same device).
template <device To, class T, device From, int R>
[[nodiscard]] tensor<T, To, R> adopt(tensor<T, From, R>&& t) {
  return tensor_access::adopt<To>(std::move(t));
}
/// v's elements as a view of device type To (the same device).
template <device To, class T, device From, int R>
[[nodiscard]] tensor_view<T, To, R> retag(const tensor_view<T, From, R>& v) {
  if constexpr (!std::is_same_v<To, From>) {
    if (v.data() != nullptr) {
      check_same_device<To, From>(id_of<From>);
      // A view of any_gpu does not know its GPU: the memory itself must be To's.
      if constexpr (is_dynamic_v<From>)
        if (v.size() != 0 && !backend::owns(id_of<To>, v.data())) throw_retag_foreign(id_of<To>);
    }
  }
  return tensor_view<T, To, R>(v.data(), v.shape(), v.name());
}
}  // namespace detail

}  // namespace locus
