#pragma once
// shape<Rank>: the run-time extents of a tensor, row-major.
#include <locus/config.hpp>
#include <locus/errors.hpp>

#include <array>
#include <cstddef>
#include <string>
#include <type_traits>

namespace locus {

namespace detail {
/// "[2, 3]" for the extents e[0..rank): every shape's str(), compiled once (the run-time part).
LOCUS_RUNTIME_INLINE std::string extents_str(const std::size_t* e, std::size_t rank);
#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE std::string extents_str(const std::size_t* e, std::size_t rank) {
  std::string s = "[";
  for (std::size_t i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(e[i]);
  return s + "]";
}
#endif
/// "locus: <who>: the shape [...] has more elements than size_t can count[ in bytes]": the
/// shape_error of every view and operand whose shape fails size_overflows() (nothing allocated for
/// it, so checked_elements never sees it).
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_too_many_elements(const std::string& who, const std::string& shape,
                                                               bool in_bytes);
#if LOCUS_RUNTIME_DEFINITIONS
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_too_many_elements(const std::string& who, const std::string& shape,
                                                               bool in_bytes) {
  throw shape_error("locus: " + who + ": the shape " + shape + " has more elements than size_t can count" +
                    (in_bytes ? " in bytes" : ""));
}
#endif
}  // namespace detail

template <int Rank>
struct shape {
  static_assert(Rank >= 0, "locus: a shape has rank 0 or more");
  std::array<std::size_t, static_cast<std::size_t>(Rank)> extents{};

  constexpr shape() = default;
  template <class... I>
    requires(sizeof...(I) == static_cast<std::size_t>(Rank) && (std::is_integral_v<I> && ...))
  constexpr shape(I... e) : extents{static_cast<std::size_t>(e)...} {  // NOLINT: shape{2, 3} reads best
    std::size_t d = 0;
    (check_extent(e, d++), ...);
  }
  constexpr explicit shape(const std::array<std::size_t, static_cast<std::size_t>(Rank)>& e) : extents(e) {}

  [[nodiscard]] constexpr std::size_t operator[](std::size_t i) const { return extents[i]; }

private:
  /// A negative extent would become a huge size_t: refused by name instead.
  template <class I>
  static constexpr void check_extent(I e, std::size_t d) {
    if constexpr (std::is_signed_v<I>)
      if (e < 0)
        throw shape_error("locus: shape: extent " + std::to_string(d) + " is " + std::to_string(e) +
                          "; extents are 0 or more");
  }

public:
  [[nodiscard]] static constexpr int rank() noexcept { return Rank; }
  /// The number of elements (1 for rank 0).
  [[nodiscard]] constexpr std::size_t size() const noexcept {
    std::size_t n = 1;
    for (auto e : extents) n *= e;
    return n;
  }
  /// True when the product of the non-zero extents does not fit in size_t (numpy's rule: [2^63, 4, 0]
  /// is refused too, though it has no elements), so that size() may have wrapped.
  [[nodiscard]] constexpr bool size_overflows() const noexcept {
    std::size_t n = 1;
    for (auto e : extents) {
      if (e == 0) continue;
      if (n > static_cast<std::size_t>(-1) / e) return true;
      n *= e;
    }
    return false;
  }
  friend constexpr bool operator==(const shape&, const shape&) = default;

  /// "[2, 3]"
  [[nodiscard]] std::string str() const { return detail::extents_str(extents.data(), extents.size()); }
};

template <class... I>
shape(I...) -> shape<static_cast<int>(sizeof...(I))>;

}  // namespace locus
