#pragma once
// Views of part of a tensor, or of its elements in another shape, on the tensor's device:
//
//   slice<0>(t, first, last)    rows [first, last), the rank kept (t.rows(first, last))
//   reshape(t, shape{...})      the same elements, row-major, in a shape of the same size
//
// Like t.row(i) (tensor/tensor.hpp), each is a non-owning tensor_view: an operand of expressions and
// a destination (`slice<0>(t, 0, 2) = slice<0>(t, 1, 3) * 2.f` reads the overlapping operand into a
// temporary first). A view of a temporary tensor would dangle and does not compile. Only axis 0
// gives a contiguous slice: a view is a pointer and a shape, without strides; slice<1> and beyond
// are read-only operands (expr/gather.hpp, with concat).
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/tensor/shape.hpp>
#include <locus/tensor/tensor.hpp>

#include <concepts>
#include <cstddef>
#include <string>
#include <type_traits>

namespace locus {

/// Rows [first, last) (axis 0), a view of the same rank. Throws shape_error naming the shape and
/// the range unless 0 <= first <= last <= extent(0). (Other axes: expr/gather.hpp, an operand.)
template <int Axis, class T, device D, int R, std::integral I, std::integral J>
  requires(Axis == 0)
[[nodiscard]] tensor_view<T, D, R> slice(const tensor_view<T, D, R>& v, I first, J last) {
  if constexpr (R == 0) {
    static_assert(R > 0, "locus: slice<Axis>(t, first, last): Axis must be 0 to the tensor's rank - 1");
    return v;
  } else {
    return detail::rows_of(v, first, last, "slice<0>");
  }
}
template <int Axis, class T, device D, int R, std::integral I, std::integral J>
  requires(Axis == 0)
[[nodiscard]] tensor_view<T, D, R> slice(tensor<T, D, R>& t, I first, J last) {
  return slice<Axis>(t.view(), first, last);
}
template <int Axis, class T, device D, int R, std::integral I, std::integral J>
  requires(Axis == 0)
[[nodiscard]] tensor_view<const T, D, R> slice(const tensor<T, D, R>& t, I first, J last) {
  return slice<Axis>(t.view(), first, last);
}
template <int Axis, class T, device D, int R, std::integral I, std::integral J>
  requires(Axis == 0)
tensor_view<T, D, R> slice(tensor<T, D, R>&& t, I first, J last) {
  static_assert(!std::is_same_v<T, T>, "locus: slice of a temporary tensor would dangle: a view does not own its "
                                       "elements; keep the tensor in a variable");
  return slice<Axis>(t.view(), first, last);
}

/// The same elements in shape s (row-major, as numpy's reshape of a contiguous array). Throws
/// shape_error naming both shapes when their sizes differ.
template <class T, device D, int R, int R2>
[[nodiscard]] tensor_view<T, D, R2> reshape(const tensor_view<T, D, R>& v, shape<R2> s) {
  if (s.size_overflows()) detail::throw_too_many_elements("reshape", s.str(), false);
  if (v.size() != s.size())
    throw shape_error("locus: reshape: a tensor of shape " + v.shape().str() + " (" + std::to_string(v.size()) +
                      " elements" + (R == 0 && v.data() == nullptr ? ", an empty rank-0 tensor" : "") +
                      ") cannot be viewed as " + s.str() + " (" + std::to_string(s.size()) + " elements)");
  return tensor_view<T, D, R2>(v.data(), s, v.name());
}
template <class T, device D, int R, int R2>
[[nodiscard]] tensor_view<T, D, R2> reshape(tensor<T, D, R>& t, shape<R2> s) {
  return reshape(t.view(), s);
}
template <class T, device D, int R, int R2>
[[nodiscard]] tensor_view<const T, D, R2> reshape(const tensor<T, D, R>& t, shape<R2> s) {
  return reshape(t.view(), s);
}
template <class T, device D, int R, int R2>
tensor_view<T, D, R2> reshape(tensor<T, D, R>&& t, shape<R2> s) {
  static_assert(!std::is_same_v<T, T>, "locus: reshape of a temporary tensor would dangle: a view does not own its "
                                       "elements; keep the tensor in a variable");
  return reshape(t.view(), s);
}

}  // namespace locus
