#pragma once
// What every locus test shares: the (device, value type) lists, random inputs, a log capture.
#include "catch.hpp"

#include <locus/locus.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace locus_test {

template <class D, class T>
struct on_device {
  using device = D;
  using value = T;
};

// Every value type runs on the cpu and on a GPU, and each GPU index meets some value type: the
// first type of a list on gpu<1>, the others on gpu<0>. Not the whole cross product: gpu<0> and
// gpu<1> run the same code but for the index, and each (type, device) pair costs a compile of
// the test (in CI's four builds, two thirds of their time went to the test files' instantiations).
#if LOCUS_HAS_GPUS
using devices = std::tuple<locus::cpu, locus::gpu<0>, locus::gpu<1>>;
#  define LOCUS_TEST_CASES_FIRST(T) on_device<locus::cpu, T>, on_device<locus::gpu<1>, T>
#  define LOCUS_TEST_CASES_FOR(T) on_device<locus::cpu, T>, on_device<locus::gpu<0>, T>
#else
using devices = std::tuple<locus::cpu>;
#  define LOCUS_TEST_CASES_FIRST(T) on_device<locus::cpu, T>
#  define LOCUS_TEST_CASES_FOR(T) on_device<locus::cpu, T>
#endif
using float_cases = std::tuple<LOCUS_TEST_CASES_FIRST(float), LOCUS_TEST_CASES_FOR(double)>;
using numeric_cases = std::tuple<LOCUS_TEST_CASES_FIRST(float), LOCUS_TEST_CASES_FOR(double), LOCUS_TEST_CASES_FOR(int)>;
using half_cases = std::tuple<LOCUS_TEST_CASES_FIRST(locus::bfloat16), LOCUS_TEST_CASES_FOR(locus::half)>;
#undef LOCUS_TEST_CASES_FIRST
#undef LOCUS_TEST_CASES_FOR

/// Reproducible random values in [lo, hi).
template <class T>
std::vector<T> random_values(std::size_t n, double lo, double hi, std::uint32_t seed = 42) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(dist(gen));
  return v;
}

/// Relative tolerance of one evaluation in T against a double-precision reference.
template <class T>
constexpr double tolerance() {
  return std::is_same_v<T, float> ? 2e-6 : std::is_same_v<T, double> ? 1e-14 : 0.0;
}

/// True when got[i] matches ref[i] within tolerance<T>() (relative, absolute near zero).
template <class T>
bool all_close(const std::vector<T>& got, const std::vector<double>& ref, double tol = tolerance<T>()) {
  if (got.size() != ref.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    if (std::abs(g - ref[i]) > tol * std::max(1.0, std::abs(ref[i]))) {
      UNSCOPED_INFO("element " << i << ": got " << g << ", expected " << ref[i]);
      return false;
    }
  }
  return true;
}

/// Captures the placement log for a scope.
struct log_capture {
  std::vector<std::string> lines;
  locus::scoped_placement_log guard{[this](std::string_view l) { lines.emplace_back(l); }};
  [[nodiscard]] bool contains(std::string_view needle) const {
    for (const auto& l : lines)
      if (l.find(needle) != std::string::npos) return true;
    return false;
  }
};

/// The name of a device in the log, with the emulation marker where there is one.
inline std::string logged(locus::device_id d) { return locus::detail::log_device(d); }

}  // namespace locus_test
