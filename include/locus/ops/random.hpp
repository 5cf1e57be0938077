#pragma once
// Counter-based random numbers: element i of a stream is a pure function of (seed, i), so a
// tensor initialised on any device, by any backend, in any order, holds the same numbers.
// Uniform values are bit-identical everywhere (an integer hash turned into a float exactly);
// normal values go through Box-Muller in double precision, identical up to the last bit of the
// device's double log/cos (the same floats after rounding, in practice; normal<double> from CUDA
// can differ from the host's in the last bit).
//     auto w = on<gpu<0>>(random::glorot_uniform<float>(shape{784, 256}, seed));
#include <locus/config.hpp>
#include <locus/expr/node.hpp>
#include <locus/tensor/shape.hpp>

#include <cmath>
#include <cstdint>

namespace locus::random {

/// SplitMix64's finaliser over (seed, counter): a strong 64-bit mix, cheap on CPUs and GPUs.
LOCUS_HOST_DEVICE constexpr std::uint64_t hash(std::uint64_t seed, std::uint64_t counter) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + counter + 0x632BE59BD9B4E5CCull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/// A double in [0, 1) from 53 random bits.
LOCUS_HOST_DEVICE constexpr double unit(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

/// lo + (hi - lo) * u, rounded the same on every device (no fused multiply-add on GPUs).
LOCUS_HOST_DEVICE inline double scale(double lo, double hi, double u) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(lo, __dmul_rn(__dsub_rn(hi, lo), u));
#else
  return lo + (hi - lo) * u;
#endif
}

// The kernels give T's values (a 16-bit T: rounded to T, handed on as float, as a load does).
template <class T>
struct uniform_kernel {
  using value_type = T;
  std::uint64_t seed;
  double lo, hi;
  LOCUS_HOST_DEVICE compute_t<T> operator()(std::size_t i) const {
    return static_cast<compute_t<T>>(static_cast<T>(scale(lo, hi, unit(hash(seed, i)))));
  }
};
template <class T>
struct normal_kernel {
  using value_type = T;
  std::uint64_t seed;
  double mean, stddev;
  LOCUS_HOST_DEVICE compute_t<T> operator()(std::size_t i) const {
    const double u1 = 1.0 - unit(hash(seed, 2 * i));  // (0, 1]: log stays finite
    const double u2 = unit(hash(seed, 2 * i + 1));
    return static_cast<compute_t<T>>(
        static_cast<T>(mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2)));
  }
};

/// Uniform in [lo, hi).
template <class T, int R>
[[nodiscard]] auto uniform(shape<R> s, std::uint64_t seed, double lo = 0.0, double hi = 1.0) {
  return expr::generated<uniform_kernel<T>, R>{{seed, lo, hi}, s, "random_uniform", "RandomUniform"};
}
/// Normal with the given mean and standard deviation.
template <class T, int R>
[[nodiscard]] auto normal(shape<R> s, std::uint64_t seed, double mean = 0.0, double stddev = 1.0) {
  return expr::generated<normal_kernel<T>, R>{{seed, mean, stddev}, s, "random_normal", "RandomStandardNormal"};
}
/// Glorot (Xavier) uniform for a [fan_in, fan_out] weight: limit sqrt(6 / (fan_in + fan_out)).
template <class T>
[[nodiscard]] auto glorot_uniform(shape<2> s, std::uint64_t seed) {
  const double limit = std::sqrt(6.0 / static_cast<double>(s[0] + s[1]));
  return uniform<T>(s, seed, -limit, limit);
}

}  // namespace locus::random
