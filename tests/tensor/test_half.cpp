// locus::bfloat16 and locus::half (tensor/half.hpp): conversions against a reference written
// independently (the nearest representable value found by search in double, ties to even).
#include "../common/catch.hpp"

#include <locus/tensor/half.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

using locus::bfloat16;
using locus::half;

namespace {

template <class H>
std::uint16_t bits_of(float f) {
  return H(f).bits;
}

/// The nearest H to f by search over the positive bit patterns (ordered like their values), ties
/// to the even pattern; out of range: inf where IEEE's rounding says so.
template <class H>
std::uint16_t reference(float f) {
  const std::uint16_t inf = std::numeric_limits<H>::infinity().bits;
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double x = std::fabs(double(f));
  if (std::isinf(f)) return sign | inf;
  // Positive finite patterns 0 .. inf-1 in value order: find the last one <= x.
  std::uint16_t lo = 0, hi = static_cast<std::uint16_t>(inf - 1);
  while (lo < hi) {
    const auto mid = static_cast<std::uint16_t>((lo + hi + 1) / 2);
    if (double(float(H::from_bits(mid))) <= x) lo = mid;
    else hi = static_cast<std::uint16_t>(mid - 1);
  }
  const double below = double(float(H::from_bits(lo)));
  // The next value up: the next pattern, or (past the largest finite) where inf would sit, one
  // ulp further (IEEE: round to inf from half an ulp past the largest finite).
  double above;
  if (lo + 1 < inf) above = double(float(H::from_bits(static_cast<std::uint16_t>(lo + 1))));
  else above = below + (below - double(float(H::from_bits(static_cast<std::uint16_t>(lo - 1)))));
  const double d_below = x - below, d_above = above - x;
  std::uint16_t r = lo;
  if (d_above < d_below || (d_above == d_below && (lo & 1))) r = static_cast<std::uint16_t>(lo + 1);
  return sign | r;
}

bool is_nan_bits_bf16(std::uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x007f) != 0; }
bool is_nan_bits_half(std::uint16_t b) { return (b & 0x7c00) == 0x7c00 && (b & 0x03ff) != 0; }

template <class H>
void check_round_trips(bool (*is_nan)(std::uint16_t)) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const H h = H::from_bits(static_cast<std::uint16_t>(b));
    const float f = float(h);
    const H back(f);
    if (is_nan(h.bits)) {
      REQUIRE(std::isnan(f));
      REQUIRE(is_nan(back.bits));                               // NaN stays NaN, never inf
      REQUIRE((back.bits & 0x8000) == (h.bits & 0x8000));      // with its sign
    } else {
      REQUIRE(back.bits == h.bits);  // exact both ways, -0 and subnormals included
    }
  }
}

/// Floats around every pattern of H: the value, its midpoints with both neighbours, and one
/// float ulp either side of each.
template <class H>
std::vector<float> hostile_floats() {
  std::vector<float> v{0.f, -0.f, 1.f, -1.f, 65504.f, 65505.f, 65519.f, 65519.996f, 65520.f, 65536.f, 1e30f,
                       std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest(),
                       std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                       std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                       5.9604644775390625e-8f, 2.98023223876953125e-8f, 2.9802326e-8f, 6.1035156e-5f};
  const std::uint16_t inf = std::numeric_limits<H>::infinity().bits;
  for (std::uint32_t b = 0; b + 1 < inf; ++b) {
    const double a = double(float(H::from_bits(static_cast<std::uint16_t>(b))));
    const double c = double(float(H::from_bits(static_cast<std::uint16_t>(b + 1))));
    for (double x : {a, (a + c) / 2}) {
      const float f = static_cast<float>(x);
      for (float g : {f, std::nextafter(f, 0.f), std::nextafter(f, 1e38f)}) {
        v.push_back(g);
        v.push_back(-g);
      }
    }
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    const float f = std::bit_cast<float>(any(rng));
    if (!std::isnan(f)) v.push_back(f);
  }
  return v;
}

}  // namespace

TEST_CASE("every bfloat16 and half pattern converts to float and back to itself", "[half]") {
  check_round_trips<bfloat16>(is_nan_bits_bf16);
  check_round_trips<half>(is_nan_bits_half);
}

TEST_CASE("float to half rounds to nearest even, against a search in double", "[half]") {
  for (float f : hostile_floats<half>()) {
    INFO("f = " << f << " bits " << std::bit_cast<std::uint32_t>(f));
    REQUIRE(bits_of<half>(f) == reference<half>(f));
  }
}

TEST_CASE("float to bfloat16 rounds to nearest even, against a search in double", "[half]") {
  for (float f : hostile_floats<bfloat16>()) {
    INFO("f = " << f << " bits " << std::bit_cast<std::uint32_t>(f));
    REQUIRE(bits_of<bfloat16>(f) == reference<bfloat16>(f));
  }
}

TEST_CASE("hostile values: range edges, ties, subnormals, NaN, signed zero", "[half]") {
  // half: the largest finite, one ulp past, the tie to inf.
  CHECK(half(65504.f).bits == 0x7bff);
  CHECK(half(65519.99f).bits == 0x7bff);
  CHECK(half(65520.f).bits == 0x7c00);  // the tie between 65504 and "65536": to inf (even)
  CHECK(half(-65520.f).bits == 0xfc00);
  CHECK(half(1e10f).bits == 0x7c00);
  // smallest subnormal 2^-24; 2^-25 is the tie with 0 (to 0); just above it rounds up.
  CHECK(half(5.9604644775390625e-8f).bits == 0x0001);
  CHECK(half(2.98023223876953125e-8f).bits == 0x0000);
  CHECK(half(std::nextafter(2.98023223876953125e-8f, 1.f)).bits == 0x0001);
  CHECK(half(-2.98023223876953125e-8f).bits == 0x8000);
  // 1.5 * 2^-24 is a tie between subnormals 1 and 2: to 2 (even).
  CHECK(half(8.940696716308594e-8f).bits == 0x0002);
  // The largest subnormal rounds up into the smallest normal.
  CHECK(half(6.1033e-5f).bits == 0x0400);
  // 1 + 2^-11 is the tie between 1 and 1 + 2^-10: to 1 (even); 1 + 3 * 2^-11: up.
  CHECK(half(1.f + 0x1p-11f).bits == 0x3c00);
  CHECK(half(1.f + 3 * 0x1p-11f).bits == 0x3c02);
  CHECK(half(-0.f).bits == 0x8000);
  CHECK(std::signbit(float(half(-0.f))));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(float(half(nan))));
  CHECK(std::isnan(float(half(-nan))));
  CHECK(std::signbit(float(half(-nan))));
  // A NaN whose payload sits in the bits half drops: still NaN, never inf.
  const float low_payload = std::bit_cast<float>(std::uint32_t{0x7f800001});
  CHECK(std::isnan(float(half(low_payload))));
  CHECK(std::isnan(float(bfloat16(low_payload))));
  CHECK(half(std::numeric_limits<float>::infinity()).bits == 0x7c00);
  // bfloat16: the largest finite, and the float max rounds to inf.
  CHECK(bfloat16(3.3895314e38f).bits == 0x7f7f);
  CHECK(bfloat16(std::numeric_limits<float>::max()).bits == 0x7f80);
  CHECK(bfloat16(1.f + 0x1p-8f).bits == 0x3f80);       // tie: to 1 (even)
  CHECK(bfloat16(1.f + 3 * 0x1p-8f).bits == 0x3f82);   // tie: up to even
  CHECK(bfloat16(std::numeric_limits<float>::denorm_min()).bits == 0x0000);
  CHECK(bfloat16(-0.f).bits == 0x8000);
}

TEST_CASE("16-bit types: limits, comparisons, printing, constexpr", "[half]") {
  static_assert(half(1.f).bits == 0x3c00 && bfloat16(1.f).bits == 0x3f80);
  static_assert(float(half::from_bits(0x7bff)) == 65504.f);
  CHECK(float(std::numeric_limits<half>::max()) == 65504.f);
  CHECK(float(std::numeric_limits<half>::epsilon()) == 0x1p-10f);
  CHECK(float(std::numeric_limits<half>::min()) == 0x1p-14f);
  CHECK(float(std::numeric_limits<half>::denorm_min()) == 0x1p-24f);
  CHECK(float(std::numeric_limits<bfloat16>::epsilon()) == 0x1p-7f);
  CHECK(float(std::numeric_limits<bfloat16>::min()) == std::numeric_limits<float>::min());
  CHECK(float(std::numeric_limits<bfloat16>::lowest()) == -float(std::numeric_limits<bfloat16>::max()));
  CHECK(std::isnan(float(std::numeric_limits<half>::quiet_NaN())));
  CHECK(std::isnan(float(std::numeric_limits<bfloat16>::signaling_NaN())));
  CHECK(float(half(0.f)) == float(half(-0.f)));
  CHECK(half(0.f).bits != half(-0.f).bits);
  std::ostringstream s;
  s << half(0.5f) << ' ' << bfloat16(-2.f);
  CHECK(s.str() == "0.5 -2");
  // A million ones: a half accumulator would stop at 2048; the types hold values, sums are the
  // tensors' business (in float).
  CHECK(float(half(2049.f)) == 2048.f);
}

TEST_CASE("integers convert to 16 bits in one rounding, 64-bit ones too", "[half]") {
  // Just above a bfloat16 midpoint, but a midpoint once rounded to double's 53 bits: rounding
  // through double would tie to even, down.
  const long long v = (1ll << 62) + (1ll << 54) + 1;
  const unsigned long long u = (1ull << 63) + (1ull << 55) + 1;
  CHECK(bfloat16(v).bits == 0x5e81);
  CHECK(bfloat16(u).bits == 0x5f01);
  CHECK(bfloat16(-v).bits == 0xde81);
  CHECK(bfloat16((1ll << 62) + (1ll << 54)).bits == 0x5e80);  // the tie itself: to even
  CHECK(bfloat16(std::numeric_limits<long long>::min()).bits == 0xdf00);  // -2^63, exact
  CHECK(bfloat16(std::numeric_limits<unsigned long long>::max()).bits == 0x5f80);  // rounds up to 2^64
  CHECK(half(65519).bits == 0x7bff);
  CHECK(half(65520).bits == 0x7c00);
  CHECK(half(std::numeric_limits<long long>::max()).bits == 0x7c00);
  CHECK(half(-2049).bits == half(-2048.f).bits);  // a tie between 2048 and 2050: to even
  CHECK(bfloat16(true).bits == bfloat16(1.f).bits);
}
