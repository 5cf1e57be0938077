#pragma once
// 16-bit floating-point element types (issue 28): locus::bfloat16 (8 exponent bits, as float) and
// locus::half (IEEE 754 binary16). Both are 2-byte, trivially copyable, standard-layout structs
// holding the bits; conversion from float rounds to nearest, ties to even, and conversion to float
// is exact. The conversions are plain integer code, the same bits on the host and inside CUDA
// kernels (where they agree with __float2bfloat16_rn / __float2half_rn).
//
// Rules a test pins (tests/tensor/test_half.cpp): every one of the 65536 bit patterns converts to
// float and back to itself (a NaN stays a NaN of the same sign, quiet); a float out of range
// becomes +-inf (half: 65520 and above; bfloat16: past its largest finite value by half an ulp),
// never a finite value; NaN never becomes inf; subnormal results round correctly; -0 stays -0.
//
// Conversions are explicit in both directions: `bfloat16(x)` rounds, `float(h)` widens. Arithmetic
// and comparisons on single values are not defined here (compare float(a) == float(b), or the bits):
// tensors of these types compute in float inside a fused kernel and round once at the store. (An
// operator== of these types, even a hidden friend, also made nvcc 13 reject `a == b` of two float
// tensors inside templates: "no operator == matches these operands".)
#include <locus/config.hpp>

#include <bit>
#include <cstdint>
#include <limits>
#include <ostream>
#include <type_traits>

namespace locus {

namespace detail {
// The conversions are written without branches (every case computed, one chosen), so that a loop
// over a tensor vectorises with the baseline instruction set (SSE2 on x86-64): a 16-bit triad moves
// half the bytes of a float one and should take about half its time (bench_host).

/// c ? x : y as masks: no branch for the compiler to keep (it would not if-convert one whose arms
/// hold a floating-point operation, which may trap).
LOCUS_HOST_DEVICE constexpr std::uint32_t pick(bool c, std::uint32_t x, std::uint32_t y) noexcept {
  const std::uint32_t m = 0u - static_cast<std::uint32_t>(c);
  return (x & m) | (y & ~m);
}

/// The bits of float f rounded to bfloat16 (nearest, ties to even).
LOCUS_HOST_DEVICE constexpr std::uint16_t float_to_bfloat16_bits(float f) noexcept {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  // Adding 0x7fff plus the lowest kept bit rounds to nearest even; a carry into the exponent is
  // the correct result, up to inf. A NaN keeps its sign and top payload, made quiet.
  const std::uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  const std::uint32_t r = pick((u & 0x7fffffffu) > 0x7f800000u, u | 0x00400000u, rounded);
  // The top half through a signed shift: x86 packs signed 32-bit lanes to 16 bits in one step.
  return static_cast<std::uint16_t>(static_cast<std::int32_t>(r) >> 16);
}

LOCUS_HOST_DEVICE constexpr float bfloat16_bits_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// The bits of float f rounded to IEEE binary16 (nearest, ties to even).
LOCUS_HOST_DEVICE constexpr std::uint16_t float_to_half_bits(float f) noexcept {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  // 2^-14 and above: rebias the exponent (127 -> 15) and round the 13 dropped bits to even; a
  // carry into the exponent is right, and 65520 and above (up to 2^16) round to inf.
  const std::uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u) - (112u << 23)) >> 13;
  // Below 2^-14: a subnormal half (or 0), m * 2^-24. Added to 0.5 (whose ulp is 2^-24) the value
  // is rounded to a multiple of 2^-24 by the float addition itself (nearest, ties to even); m is
  // then the sum's low bits (0x400: rounded up to the smallest normal, the right bits too).
  const std::uint32_t sub = std::bit_cast<std::uint32_t>(std::bit_cast<float>(a) + 0.5f) - 0x3f000000u;
  // 2^16 and above: inf; NaN: quiet, the payload's top bits kept.
  const std::uint32_t big = a > 0x7f800000u ? (0x7e00u | ((a >> 13) & 0x03ffu)) : 0x7c00u;
  const std::uint32_t r = pick(a >= 0x47800000u, big, pick(a < 0x38800000u, sub, normal));
  // Sign-extended from 16 bits, so that x86 packs the lanes with one signed pack (as above).
  return static_cast<std::uint16_t>(static_cast<std::int32_t>((sign | r) << 16) >> 16);
}

/// d rounded to float toward zero with the lowest bit set when inexact ("round to odd"): rounding
/// that float again to 16 bits gives d correctly rounded (float keeps 24 bits, more than the
/// 2 * 11 + 2 that exclude a double rounding), where d -> float -> 16 bits could round twice.
LOCUS_HOST_DEVICE constexpr float round_to_odd(double d) noexcept {
  if (d != d) return static_cast<float>(d);  // NOLINT(misc-redundant-expression): NaN
  float f = static_cast<float>(d);          // nearest (inf past float's range)
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const double back = static_cast<double>(f);
  if (back == d) return f;
  if ((back < 0 ? -back : back) > (d < 0 ? -d : d)) --u;  // rounded away from zero: step back toward it
  return std::bit_cast<float>(u | 1u);
}

/// Integer i as a double rounded to odd (at 53 bits): exact below 2^53; wider integers keep 53 bits
/// with the lowest set when any dropped bit was, so that rounding on to 16 bits is one rounding.
template <class I>
LOCUS_HOST_DEVICE constexpr double integer_to_odd_double(I i) noexcept {
  if constexpr (sizeof(I) < 8) {
    return static_cast<double>(i);  // exact
  } else {
    const bool negative = std::is_signed_v<I> && i < 0;
    std::uint64_t u = negative ? 0u - static_cast<std::uint64_t>(i) : static_cast<std::uint64_t>(i);
    double scale = 1.0;
    while (u >= (std::uint64_t{1} << 53)) {  // at most 11 steps
      u = (u >> 1) | (u & 1u);  // a dropped 1 stays as the lowest bit (sticky)
      scale *= 2.0;
    }
    const double d = static_cast<double>(u) * scale;  // exact: u < 2^53, scale a power of two
    return negative ? -d : d;
  }
}

LOCUS_HOST_DEVICE constexpr float half_bits_to_float(std::uint16_t h) noexcept {
  const std::uint32_t em = h & 0x7fffu, sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t normal = (em << 13) + (112u << 23);                               // rebias 15 -> 127
  const std::uint32_t special = (em << 13) | 0x7f800000u;                              // inf, NaN
  const std::uint32_t sub = std::bit_cast<std::uint32_t>(static_cast<float>(em) * 0x1p-24f);  // m * 2^-24, exact
  const std::uint32_t r = pick(em >= 0x7c00u, special, pick(em < 0x0400u, sub, normal));
  return std::bit_cast<float>(sign | r);
}
}  // namespace detail

/// bfloat16: 1 sign, 8 exponent, 7 fraction bits (float's range, 3 significant decimal digits).
struct bfloat16 {
  std::uint16_t bits;

  bfloat16() = default;  // uninitialised, as float is
  LOCUS_HOST_DEVICE constexpr explicit bfloat16(float f) noexcept : bits(detail::float_to_bfloat16_bits(f)) {}
  /// From double: rounded once (not through a rounded float), and from integers through that.
  LOCUS_HOST_DEVICE constexpr explicit bfloat16(double d) noexcept : bfloat16(detail::round_to_odd(d)) {}
  template <class I>
    requires std::is_integral_v<I>
  LOCUS_HOST_DEVICE constexpr explicit bfloat16(I i) noexcept : bfloat16(detail::integer_to_odd_double(i)) {}
  LOCUS_HOST_DEVICE constexpr explicit operator float() const noexcept { return detail::bfloat16_bits_to_float(bits); }
  LOCUS_HOST_DEVICE static constexpr bfloat16 from_bits(std::uint16_t b) noexcept {
    bfloat16 h;
    h.bits = b;
    return h;
  }
};

/// half: IEEE 754 binary16, 1 sign, 5 exponent, 10 fraction bits (largest finite 65504).
struct half {
  std::uint16_t bits;

  half() = default;
  LOCUS_HOST_DEVICE constexpr explicit half(float f) noexcept : bits(detail::float_to_half_bits(f)) {}
  /// From double: rounded once (not through a rounded float), and from integers through that.
  LOCUS_HOST_DEVICE constexpr explicit half(double d) noexcept : half(detail::round_to_odd(d)) {}
  template <class I>
    requires std::is_integral_v<I>
  LOCUS_HOST_DEVICE constexpr explicit half(I i) noexcept : half(detail::integer_to_odd_double(i)) {}
  LOCUS_HOST_DEVICE constexpr explicit operator float() const noexcept { return detail::half_bits_to_float(bits); }
  LOCUS_HOST_DEVICE static constexpr half from_bits(std::uint16_t b) noexcept {
    half h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(bfloat16) == 2 && sizeof(half) == 2);
static_assert(std::is_trivially_copyable_v<bfloat16> && std::is_trivially_copyable_v<half>);
static_assert(std::is_standard_layout_v<bfloat16> && std::is_standard_layout_v<half>);

/// True for locus's 16-bit floating-point types.
template <class T>
inline constexpr bool is_half_float_v = std::is_same_v<T, bfloat16> || std::is_same_v<T, half>;

/// The type elements of T are computed in inside a kernel: float for the 16-bit types (loaded
/// exactly, rounded once when stored), T itself otherwise.
template <class T>
using compute_t = std::conditional_t<is_half_float_v<T>, float, T>;

/// Values print as the float they equal.
inline std::ostream& operator<<(std::ostream& os, bfloat16 h) { return os << float(h); }
inline std::ostream& operator<<(std::ostream& os, half h) { return os << float(h); }

}  // namespace locus

namespace std {
template <>
class numeric_limits<locus::bfloat16> {
public:
  static constexpr bool is_specialized = true, is_signed = true, is_integer = false, is_exact = false,
                        has_infinity = true, has_quiet_NaN = true, has_signaling_NaN = true, is_iec559 = false,
                        is_bounded = true, is_modulo = false;
  static constexpr int digits = 8, digits10 = 2, max_digits10 = 4, radix = 2;
  static constexpr int min_exponent = -125, min_exponent10 = -37, max_exponent = 128, max_exponent10 = 38;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr locus::bfloat16 min() noexcept { return locus::bfloat16::from_bits(0x0080); }
  static constexpr locus::bfloat16 lowest() noexcept { return locus::bfloat16::from_bits(0xff7f); }
  static constexpr locus::bfloat16 max() noexcept { return locus::bfloat16::from_bits(0x7f7f); }
  static constexpr locus::bfloat16 epsilon() noexcept { return locus::bfloat16::from_bits(0x3c00); }  // 2^-7
  static constexpr locus::bfloat16 round_error() noexcept { return locus::bfloat16::from_bits(0x3f00); }
  static constexpr locus::bfloat16 infinity() noexcept { return locus::bfloat16::from_bits(0x7f80); }
  static constexpr locus::bfloat16 quiet_NaN() noexcept { return locus::bfloat16::from_bits(0x7fc0); }
  static constexpr locus::bfloat16 signaling_NaN() noexcept { return locus::bfloat16::from_bits(0x7fa0); }
  static constexpr locus::bfloat16 denorm_min() noexcept { return locus::bfloat16::from_bits(0x0001); }
};
template <>
class numeric_limits<locus::half> {
public:
  static constexpr bool is_specialized = true, is_signed = true, is_integer = false, is_exact = false,
                        has_infinity = true, has_quiet_NaN = true, has_signaling_NaN = true, is_iec559 = true,
                        is_bounded = true, is_modulo = false;
  static constexpr int digits = 11, digits10 = 3, max_digits10 = 5, radix = 2;
  static constexpr int min_exponent = -13, min_exponent10 = -4, max_exponent = 16, max_exponent10 = 4;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr locus::half min() noexcept { return locus::half::from_bits(0x0400); }
  static constexpr locus::half lowest() noexcept { return locus::half::from_bits(0xfbff); }
  static constexpr locus::half max() noexcept { return locus::half::from_bits(0x7bff); }
  static constexpr locus::half epsilon() noexcept { return locus::half::from_bits(0x1400); }  // 2^-10
  static constexpr locus::half round_error() noexcept { return locus::half::from_bits(0x3800); }
  static constexpr locus::half infinity() noexcept { return locus::half::from_bits(0x7c00); }
  static constexpr locus::half quiet_NaN() noexcept { return locus::half::from_bits(0x7e00); }
  static constexpr locus::half signaling_NaN() noexcept { return locus::half::from_bits(0x7d00); }
  static constexpr locus::half denorm_min() noexcept { return locus::half::from_bits(0x0001); }
};
}  // namespace std
