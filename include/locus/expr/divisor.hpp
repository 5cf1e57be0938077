#pragma once
// i / d and i % d by a multiplication: the broadcasting kernels divide every flat index by the row
// length, and a 64-bit division costs tens of cycles (on the host and on GPUs alike). For operands
// below 2^32 this uses Lemire, Kaser and Kurz, "Faster remainder by direct computation" (2019):
// with M = ceil(2^64 / d), i / d = (M * i) >> 64 and i % d = ((M * i mod 2^64) * d) >> 64.
// Larger operands fall back to the division instructions.
#include <locus/config.hpp>

#include <cstddef>
#include <cstdint>

namespace locus::expr {

class divisor {
public:
  constexpr divisor() noexcept = default;
  explicit constexpr divisor(std::size_t d) noexcept
      : d_(d), m_(d > 1 && d <= 0xFFFFFFFFu ? ~std::uint64_t{0} / d + 1 : 0) {}

  [[nodiscard]] constexpr std::size_t value() const noexcept { return d_; }

  [[nodiscard]] LOCUS_HOST_DEVICE std::size_t div(std::size_t i) const noexcept {
    if (m_ != 0 && i <= 0xFFFFFFFFu) return static_cast<std::size_t>(mulhi(m_, i));
    return i / d_;
  }
  [[nodiscard]] LOCUS_HOST_DEVICE std::size_t mod(std::size_t i) const noexcept {
    if (m_ != 0 && i <= 0xFFFFFFFFu) return static_cast<std::size_t>(mulhi(m_ * i, d_));
    return i % d_;
  }

private:
  [[nodiscard]] LOCUS_HOST_DEVICE static std::uint64_t mulhi(std::uint64_t a, std::uint64_t b) noexcept {
#if defined(__CUDA_ARCH__)
    return __umul64hi(a, b);
#else
    __extension__ typedef unsigned __int128 u128;  // GCC and Clang (and nvcc's host side)
    return static_cast<std::uint64_t>((static_cast<u128>(a) * b) >> 64);
#endif
  }
  std::size_t d_ = 1;
  std::uint64_t m_ = 0;  ///< ceil(2^64 / d) when d is in [2, 2^32), else 0 (plain division)
};

}  // namespace locus::expr
