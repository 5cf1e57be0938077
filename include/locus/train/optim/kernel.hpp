#pragma once
// What every optimiser's kernel is built from: the arguments of one step, the pointers of one
// parameter tensor and its state, and products, quotients, sums and square roots rounded one at a
// time on every device.
#include <locus/config.hpp>

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

namespace locus::train {

namespace detail {
/// x as the shortest text that reads back to it ("-1e-09", "0.9", "nan", "inf"), for the options'
/// messages (std::to_string prints 6 fixed digits: -1e-9 as "-0.000000").
template <class F>
std::string option_value(F x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}
}  // namespace detail

/// The most state buffers an optimiser keeps per parameter (Adam's two moments).
inline constexpr std::size_t max_state_buffers = 2;

/// The arguments of one step, the same for every tensor of a replica.
struct step_args {
  float lr = 0.f;          ///< the scheduled learning rate of this step
  float scale = 1.f;       ///< the gradient's scale (sync_average: 1 / replicas; else 1)
  std::uint64_t step = 1;  ///< this replica's optimiser steps, this one included (1 at the first)
};

/// One parameter tensor's element pointers on its device: p, its gradient g and the optimiser's
/// state buffers (the first state_buffers() are valid).
struct tensor_state {
  float* p = nullptr;
  const float* g = nullptr;
  float* state[max_state_buffers] = {};
};

namespace detail {
// Products, quotients, sums and square roots rounded one at a time, on every device: nvcc would
// fuse v * m + g into one FMA (one rounding) where the host rounds twice, and replicas of one
// sync_average trainer on a cpu and a GPU would drift apart by an ulp a step (seen on an H200: a
// resumed mixed cpu + GPU run no longer equalled the uninterrupted one). The host build must not
// contract either (no -ffp-contract=fast with FMA instructions enabled).
LOCUS_HOST_DEVICE inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
LOCUS_HOST_DEVICE inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
/// IEEE division and square root (correctly rounded), whatever -prec-div / -prec-sqrt say.
LOCUS_HOST_DEVICE inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
LOCUS_HOST_DEVICE inline float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
}  // namespace detail

}  // namespace locus::train
