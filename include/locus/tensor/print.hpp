#pragma once
// Printing tensors and views the way numpy prints arrays: a header line with the C++ type and the
// shape, then the values, nested brackets, one row per line, columns aligned, floating-point values
// with a common number of fraction digits (numpy's floatmode "maxprec_equal", scientific when the
// magnitudes call for it), nan and inf as numpy spells them, and more than `threshold` elements
// summarised by their first and last `edge_items` along each axis:
//
//     tensor<float, gpu<1>, 2> [2, 3]
//     [[ 1.50,  2.00, -3.25],
//      [ 4.00,  5.00,  6.00]]
//
// `std::cout << t`, `locus::to_string(t, print_options{...})`, and `std::format("{}", t)` where the
// standard library has <format> (__cpp_lib_format: libstdc++ 13+, not Debian 12's g++ 12). Tensors of
// arithmetic element types print. A GPU tensor's shown elements are copied to the host, logged and
// counted in transfer_stats() like every transfer (a summarised one copies only what is shown).
#include <locus/backend/memory.hpp>
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/log.hpp>
#include <locus/tensor/half.hpp>
#include <locus/tensor/shape.hpp>
#include <locus/tensor/tensor.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>
#include <version>
#if defined(__cpp_lib_format)
#  include <format>
#endif

namespace locus {

/// numpy's print options (numpy.set_printoptions), passed per call.
struct print_options {
  std::size_t threshold = 1000;  ///< more elements than this: every axis longer than 2 * edge_items is elided
  std::size_t edge_items = 3;    ///< the entries kept at each end of an elided axis
  int precision = 8;             ///< the most fraction digits of a floating-point element (0 or more: config_error)
  std::size_t line_width = 75;   ///< a row wraps before it passes this column
};

namespace detail {

template <class T>
constexpr const char* element_type_name() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, bool>) return "bool";
  else if constexpr (std::is_same_v<U, char>) return "char";
  else if constexpr (std::is_same_v<U, signed char>) return "signed char";
  else if constexpr (std::is_same_v<U, unsigned char>) return "unsigned char";
  else if constexpr (std::is_same_v<U, short>) return "short";
  else if constexpr (std::is_same_v<U, unsigned short>) return "unsigned short";
  else if constexpr (std::is_same_v<U, int>) return "int";
  else if constexpr (std::is_same_v<U, unsigned>) return "unsigned";
  else if constexpr (std::is_same_v<U, long>) return "long";
  else if constexpr (std::is_same_v<U, unsigned long>) return "unsigned long";
  else if constexpr (std::is_same_v<U, long long>) return "long long";
  else if constexpr (std::is_same_v<U, unsigned long long>) return "unsigned long long";
  else if constexpr (std::is_same_v<U, float>) return "float";
  else if constexpr (std::is_same_v<U, bfloat16>) return "bfloat16";
  else if constexpr (std::is_same_v<U, half>) return "half";
  else if constexpr (std::is_same_v<U, double>) return "double";
  else if constexpr (std::is_same_v<U, long double>) return "long double";
  else if constexpr (std::is_same_v<U, wchar_t>) return "wchar_t";
  else if constexpr (std::is_same_v<U, char8_t>) return "char8_t";
  else if constexpr (std::is_same_v<U, char16_t>) return "char16_t";
  else return "char32_t";
}

/// The entries of one axis that are shown: all of them, or the first and last `edge`.
struct shown_axis {
  std::size_t extent = 0;
  std::size_t edge = 0;
  bool elided = false;
  [[nodiscard]] std::size_t count() const noexcept { return elided ? 2 * edge : extent; }
  [[nodiscard]] std::size_t index(std::size_t k) const noexcept { return elided && k >= edge ? extent - 2 * edge + k : k; }
};

template <int R>
using shown_axes = std::array<shown_axis, static_cast<std::size_t>(R)>;

/// The shown elements, in row-major order of the shown entries, copied to the host in runs along the
/// last axis (one copy each; a GPU's copies are logged and counted as one transfer).
template <class T, device D, int R>
std::unique_ptr<std::remove_const_t<T>[]> gather(const tensor_view<T, D, R>& v, const shown_axes<R>& axes) {
  using U = std::remove_const_t<T>;
  std::size_t total = 1;
  for (const auto& a : axes) total *= a.count();
  if (v.size() == 0) total = 0;  // an empty rank-0 tensor
  auto out = std::make_unique<U[]>(total);
  if (total == 0) return out;
  std::size_t written = 0;
  const auto copy_run = [&](std::size_t from, std::size_t n) {
    backend::copy(id_of<cpu>, out.get() + written, id_of<D>, v.data() + from, n * sizeof(U));
    written += n;
  };
  if constexpr (R == 0) {
    copy_run(0, 1);
  } else {
    std::array<std::size_t, static_cast<std::size_t>(R)> stride{};
    stride[R - 1] = 1;
    for (int d = R - 2; d >= 0; --d) stride[d] = stride[d + 1] * v.extent(static_cast<std::size_t>(d + 1));
    std::array<std::size_t, static_cast<std::size_t>(R)> k{};  // the shown entry of each axis before the last: a mixed-radix counter
    const shown_axis& last = axes[R - 1];
    for (;;) {
      std::size_t base = 0;
      for (int d = 0; d + 1 < R; ++d) base += axes[d].index(k[d]) * stride[d];
      if (last.elided) {
        copy_run(base, last.edge);
        copy_run(base + last.extent - last.edge, last.edge);
      } else {
        copy_run(base, last.extent);
      }
      int d = R - 2;
      for (; d >= 0 && ++k[d] == axes[d].count(); --d) k[d] = 0;
      if (d < 0) break;
    }
  }
  if constexpr (!std::is_same_v<D, cpu>) log_transfer(id_of<D>, id_of<cpu>, total * sizeof(U));
  return out;
}

/// The fewest fraction digits (at most `most`) that read back as the same 16-bit value H: a
/// bfloat16 0.1 prints as 0.1, not as the float it equals, 0.10009766.
template <class H>
int fewest_digits(float x, std::chars_format format, int most) {
  char buf[128];
  for (int p = 0; p < most; ++p) {
    const auto r = std::to_chars(buf, buf + sizeof buf, x, format, p);
    float back = 0;
    if (r.ec == std::errc{} && std::from_chars(buf, r.ptr, back, format).ec == std::errc{} &&
        H(back).bits == H(x).bits)
      return p;
  }
  return most;
}

/// The text of each shown element, numpy's way: a common format for the whole tensor. H is the
/// element type when the values are 16-bit floats given as float.
template <class U, class H = U>
std::vector<std::string> element_words(const U* x, std::size_t n, const print_options& o) {
  std::vector<std::string> words(n);
  char buf[128];
  const auto chars = [&](auto... how) {
    const auto r = std::to_chars(buf, buf + sizeof buf, how...);
    return r.ec == std::errc{} ? std::string(buf, r.ptr) : std::string("?");
  };
  if constexpr (std::is_same_v<U, bool>) {
    for (std::size_t i = 0; i < n; ++i) words[i] = x[i] ? "true" : "false";
  } else if constexpr (std::is_integral_v<U>) {
    using wide = std::conditional_t<std::is_signed_v<U>, long long, unsigned long long>;  // chars as numbers
    for (std::size_t i = 0; i < n; ++i) words[i] = chars(static_cast<wide>(x[i]));
  } else {
    // numpy: scientific when a magnitude is 1e8 or more, a non-zero one below 1e-4, or their ratio
    // above 1000; otherwise fixed. Digits: the most any element needs to be read back exactly, at
    // most `precision`, the same for all.
    U lo = 0, hi = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (std::isfinite(x[i]) && x[i] != 0) {
        const U a = std::abs(x[i]);
        lo = lo == 0 ? a : std::min(lo, a);
        hi = std::max(hi, a);
      }
    const bool scientific = hi >= U(1e8) || (lo != 0 && (lo < U(1e-4) || hi / lo > U(1000)));
    const auto format = scientific ? std::chars_format::scientific : std::chars_format::fixed;
    const int most = o.precision;
    int digits = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (!std::isfinite(x[i])) continue;
      if constexpr (is_half_float_v<H>) {
        digits = std::max(digits, fewest_digits<H>(x[i], format, most));
        continue;
      }
      const std::string shortest = chars(x[i], format);
      const auto dot = shortest.find('.');
      if (dot == std::string::npos) continue;
      const auto end = scientific ? shortest.find('e') : shortest.size();
      digits = std::max(digits, std::min(most, static_cast<int>(end - dot - 1)));
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (std::isnan(x[i])) {
        words[i] = "nan";
      } else if (std::isinf(x[i])) {
        words[i] = x[i] < 0 ? "-inf" : "inf";
      } else {
        const std::string w = chars(x[i], format, digits);
        if (digits == 0) {  // "1.", "1.e+10" (built by appends: GCC 12 at -O3 warns on insert, -Wrestrict)
          const std::size_t at = scientific ? std::min(w.find('e'), w.size()) : w.size();
          words[i].assign(w, 0, at);
          words[i] += '.';
          words[i].append(w, at, std::string::npos);
        } else {
          words[i] = w;
        }
      }
    }
  }
  return words;
}

/// Lays the words out in nested brackets, numpy's way.
template <int R>
class array_layout {
public:
  array_layout(const std::vector<std::string>& words, const shown_axes<R>& axes, const print_options& o)
      : words_(words), axes_(axes), options_(o) {
    for (const auto& w : words) width_ = std::max(width_, w.size());
  }
  [[nodiscard]] std::string str() {
    if constexpr (R == 0) {
      return words_.empty() ? "(empty)" : words_[0];
    } else {
      for (const auto& a : axes_)
        if (a.extent == 0) return "[]";
      axis(0, "");
      return std::move(out_);
    }
  }

private:
  [[nodiscard]] std::string padded(const std::string& w) const { return std::string(width_ - w.size(), ' ') + w; }

  /// The entries of axis d in brackets, "..." in place of an elided middle. Rows of the last axis
  /// wrap; the entries of an outer axis are separated by as many line breaks as axes follow it.
  void axis(std::size_t d, const std::string& indent) {
    const shown_axis& a = axes_[d];
    const std::size_t entries = a.count() + (a.elided ? 1 : 0);
    const bool last = d + 1 == static_cast<std::size_t>(R);
    const std::string inner = indent + ' ';
    const std::string separator = ',' + std::string(static_cast<std::size_t>(R) - d - 1, '\n') + inner;
    std::size_t column = inner.size();
    out_ += '[';
    for (std::size_t k = 0; k < entries; ++k) {
      const bool dots = a.elided && k == a.edge;
      if (last) {
        word(dots ? std::string("...") : padded(words_[next_++]), inner.size(), column, k == 0);
      } else {
        if (k != 0) out_ += separator;
        if (dots) out_ += "...";
        else axis(d + 1, inner);
      }
    }
    out_ += ']';
  }

  /// One entry of the last axis, on a new line (indented to `start`) where it would pass the width.
  void word(const std::string& w, std::size_t start, std::size_t& column, bool first) {
    if (!first && column + 2 + w.size() + 1 > options_.line_width) {
      out_ += ",\n" + std::string(start, ' ');
      column = start;
    } else if (!first) {
      out_ += ", ";
      column += 2;
    }
    out_ += w;
    column += w.size();
  }

  const std::vector<std::string>& words_;
  const shown_axes<R>& axes_;
  const print_options& options_;
  std::size_t width_ = 0;
  std::size_t next_ = 0;
  std::string out_;
};

template <class T, device D, int R>
std::string print(const char* kind, const tensor_view<T, D, R>& v, const print_options& o) {
  std::string s = std::string(kind) + '<' + element_type_name<T>() + ", " + id_of<D>.type_name() +
                  (R == 1 ? std::string() : ", " + std::to_string(R)) + "> " + v.shape().str() + '\n';
  if (o.precision < 0)
    throw config_error("locus: print_options: precision is " + std::to_string(o.precision) +
                       "; it is the most fraction digits, 0 or more");
  shown_axes<R> axes{};
  const bool summarise = v.size() > o.threshold;
  if constexpr (R > 0)
    for (std::size_t d = 0; d < static_cast<std::size_t>(R); ++d) {
      // extent > 2 * edge_items, without the product (a huge edge_items would wrap it).
      const std::size_t n = v.extent(d), e = o.edge_items;
      axes[d] = {n, e, summarise && e < n && n - e > e};
    }
  std::size_t shown = v.size() == 0 ? 0 : 1;
  for (const auto& a : axes) shown *= a.count();
  const auto host = gather(v, axes);
  using U = std::remove_const_t<T>;
  if constexpr (is_half_float_v<U>) {
    std::vector<float> values(shown);
    for (std::size_t i = 0; i < shown; ++i) values[i] = float(host[i]);
    return s + array_layout<R>(element_words<float, U>(values.data(), shown, o), axes, o).str();
  } else {
    return s + array_layout<R>(element_words(host.get(), shown, o), axes, o).str();
  }
}

}  // namespace detail

/// The printed form of a view: "tensor_view<float, cpu, 2> [2, 3]\n[[...]]".
template <class T, device D, int R>
  requires(std::is_arithmetic_v<T> || is_half_float_v<T>)
[[nodiscard]] std::string to_string(const tensor_view<T, D, R>& v, const print_options& o = {}) {
  return detail::print("tensor_view", v, o);
}
/// The printed form of a tensor: "tensor<float, gpu<1>> [3]\n[1., 2., 3.]".
template <class T, device D, int R>
  requires(std::is_arithmetic_v<T> || is_half_float_v<T>)
[[nodiscard]] std::string to_string(const tensor<T, D, R>& t, const print_options& o = {}) {
  return detail::print("tensor", t.view(), o);
}

template <class T, device D, int R>
  requires(std::is_arithmetic_v<T> || is_half_float_v<T>)
std::ostream& operator<<(std::ostream& os, const tensor_view<T, D, R>& v) {
  return os << to_string(v);
}
template <class T, device D, int R>
  requires(std::is_arithmetic_v<T> || is_half_float_v<T>)
std::ostream& operator<<(std::ostream& os, const tensor<T, D, R>& t) {
  return os << to_string(t);
}

}  // namespace locus

#if defined(__cpp_lib_format)
/// std::format("{}", t): to_string(t); a width, fill and alignment apply to the whole text.
template <class T, locus::device D, int R>
  requires(std::is_arithmetic_v<T> || is_half_float_v<T>)
struct std::formatter<locus::tensor<T, D, R>, char> : std::formatter<std::string_view, char> {
  template <class FormatContext>
  auto format(const locus::tensor<T, D, R>& t, FormatContext& ctx) const {
    std::formatter<std::string_view, char> text = *this;  // a copy: format() is const only since LWG 3636
    return text.format(locus::to_string(t), ctx);
  }
};
template <class T, locus::device D, int R>
  requires(std::is_arithmetic_v<T> || is_half_float_v<T>)
struct std::formatter<locus::tensor_view<T, D, R>, char> : std::formatter<std::string_view, char> {
  template <class FormatContext>
  auto format(const locus::tensor_view<T, D, R>& v, FormatContext& ctx) const {
    std::formatter<std::string_view, char> text = *this;
    return text.format(locus::to_string(v), ctx);
  }
};
#endif
