#pragma once
// Convolution and pooling over NCHW batches, placed and checked like every expression:
//     auto y = on<gpu<1>>(relu(conv2d(x, w, b, {.stride = 2, .padding = 1})));
//     auto p = on<gpu<1>>(max_pool2d(y, 2));          // window 2x2, stride 2
// x is [N, C, H, W], w [K, C, R, S], b [K] (optional: the bias is added in the kernel that writes
// the result); the result is [N, K, H', W'] with H' = (H + 2 padding - dilation (R - 1) - 1) / stride + 1
// (PyTorch's and TensorFlow's formula). Pooling windows do not pad; stride defaults to the window.
//
// How it runs (host and CUDA alike, no cuDNN): im2col into a [C R S, N H' W'] matrix from the
// caching arena (one kernel; on the host each tap's row is runs of input rows), one GEMM W cols
// (CBLAS / cuBLAS, as matmul), one kernel that writes NCHW and adds the bias. Backward (locus::ad,
// ad/conv.hpp): the gradient permuted to [K, N H' W'] (one kernel), dW = g cols^T and dcols = W^T g
// (two GEMMs), dx gathered from dcols (one kernel, no atomics: deterministic), db the row sums of g. max_pool2d's gradient goes to the
// window's first maximum (NaN counts as the maximum: a window with a NaN gives NaN and routes the
// gradient to its first NaN); avg_pool2d's is spread evenly.
//
// An operand that is an expression is evaluated into a temporary first (like matmul's); the
// operations are staged operands of larger expressions (`relu(conv2d(x, w) + 1.f)`). They are
// logged with TensorFlow's op names: conv2d (Conv2D), max_pool2d (MaxPool), avg_pool2d (AvgPool).
// Bad shapes and options throw (shape_error, config_error) when the expression is built, before
// anything runs. Element types: float and double.
#include <locus/backend/blas.hpp>
#include <locus/backend/parallel.hpp>
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/expr/node.hpp>
#include <locus/expr/operators.hpp>
#include <locus/ops/matmul.hpp>
#include <locus/ops/reduce.hpp>
#include <locus/placement/on.hpp>
#include <locus/tensor/tensor.hpp>

#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace locus {

/// Two extents, one per spatial axis: `2` means 2 along both, `{2, 1}` height 2 and width 1.
struct extent2 {
  std::int64_t h = 0, w = 0;
  constexpr extent2() = default;
  constexpr extent2(std::int64_t both) : h(both), w(both) {}  // NOLINT(google-explicit-constructor)
  constexpr extent2(std::int64_t h_, std::int64_t w_) : h(h_), w(w_) {}
  [[nodiscard]] std::string str() const { return h == w ? std::to_string(h) : std::to_string(h) + "x" + std::to_string(w); }
};

/// conv2d's options: strides 1 or more, paddings 0 or more (zeros around the input), dilations 1 or more.
struct conv2d_options {
  extent2 stride = 1;
  extent2 padding = 0;
  extent2 dilation = 1;
};

namespace ops {
struct conv2d {
  static constexpr const char* name = "conv2d";
  static constexpr const char* type = "Conv2D";
};
struct max_pool2d {
  static constexpr const char* name = "max_pool2d";
  static constexpr const char* type = "MaxPool";
};
struct avg_pool2d {
  static constexpr const char* name = "avg_pool2d";
  static constexpr const char* type = "AvgPool";
};
}  // namespace ops

namespace detail {

/// Everything a convolution's kernels need, checked: input [n, c, h, w], filters [k, c, r, s].
struct conv_geometry {
  std::size_t n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0;
  std::size_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  std::size_t oh = 0, ow = 0;
  [[nodiscard]] LOCUS_HOST_DEVICE std::size_t positions() const { return oh * ow; }
  [[nodiscard]] LOCUS_HOST_DEVICE std::size_t patch() const { return c * r * s; }
};

/// A pooling window over input [n, c, h, w].
struct pool_geometry {
  std::size_t n = 0, c = 0, h = 0, w = 0, wh = 1, ww = 1, sh = 1, sw = 1, oh = 0, ow = 0;
};

inline void check_extent_option(const char* op, const char* what, const extent2& e, std::int64_t least) {
  if (e.h < least || e.w < least)
    throw config_error(std::string("locus: ") + op + ": " + what + " " + e.str() + " (a " + what + " is " +
                       std::to_string(least) + " or more along each axis)");
}

/// Strides and dilations 1 or more, paddings 0 or more (conv2d, and nn::conv2d when it is made).
inline void check_conv_options(const char* op, const conv2d_options& o) {
  check_extent_option(op, "stride", o.stride, 1);
  check_extent_option(op, "padding", o.padding, 0);
  check_extent_option(op, "dilation", o.dilation, 1);
}

/// The operands' shapes as the messages name them ("x of shape [...], w of shape [...]"), built
/// only when a message is: geometry is computed for every evaluation.
struct operand_shapes {
  const shape<4>& x;
  const shape<4>* w = nullptr;
  [[nodiscard]] std::string str() const { return "x of shape " + x.str() + (w != nullptr ? ", w of shape " + w->str() : ""); }
};

/// The output extent of one axis; throws when the (dilated) window does not fit the padded input
/// (computed without overflow: a padding or dilation near 2^63 is refused, not wrapped).
inline std::size_t window_positions(const char* op, const char* axis, std::size_t in, std::size_t pad, std::size_t window,
                                    std::size_t dilation, std::size_t stride, const operand_shapes& shapes) {
  constexpr std::size_t most = std::size_t(1) << 62;  // far beyond any tensor, far from wrapping
  const auto where = [&] { return std::string("locus: ") + op + ": " + shapes.str() + ": "; };
  if (in > most) throw shape_error(where() + "an input of " + std::to_string(in) + " along the " + axis + " (past 2^62)");
  if (pad > most) throw shape_error(where() + "a padding of " + std::to_string(pad) + " along the " + axis + " (past 2^62)");
  if (window > 1 && dilation > most / (window - 1))
    throw shape_error(where() + "a window of " + std::to_string(window) +
                      (dilation != 1 ? " dilated by " + std::to_string(dilation) : std::string()) + " along the " + axis +
                      " spans more than 2^62");
  const std::size_t span = dilation * (window - 1) + 1;
  if (window == 0 || span > in + 2 * pad)
    throw shape_error(where() + "a window of " + std::to_string(window == 0 ? 0 : span) + " along the " + axis +
                      " does not fit the input's " + std::to_string(in) +
                      (pad != 0 ? " (" + std::to_string(in + 2 * pad) + " padded)" : std::string()));
  return (in + 2 * pad - span) / stride + 1;
}

/// A result whose element count does not fit a size_t (a padding near 2^62) is refused when the
/// expression is built, not at the allocation.
inline void check_output_size(const char* op, const operand_shapes& shapes, const shape<4>& out) {
  if (out.size_overflows())
    throw shape_error(std::string("locus: ") + op + ": " + shapes.str() + ": the result's shape " + out.str() +
                      " has more elements than a size_t counts");
}

inline conv_geometry conv_geometry_of(const shape<4>& x, const shape<4>& w, const conv2d_options& o) {
  check_conv_options("conv2d", o);
  const operand_shapes shapes{x, &w};
  if (x[1] != w[1])
    throw shape_error("locus: conv2d: " + shapes.str() + ": x has " + std::to_string(x[1]) + " channels, w's filters take " +
                      std::to_string(w[1]) + " (w is [out channels, in channels, height, width])");
  conv_geometry g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3], g.k = w[0], g.r = w[2], g.s = w[3];
  g.sh = std::size_t(o.stride.h), g.sw = std::size_t(o.stride.w);
  g.ph = std::size_t(o.padding.h), g.pw = std::size_t(o.padding.w);
  g.dh = std::size_t(o.dilation.h), g.dw = std::size_t(o.dilation.w);
  g.oh = window_positions("conv2d", "height", g.h, g.ph, g.r, g.dh, g.sh, shapes);
  g.ow = window_positions("conv2d", "width", g.w, g.pw, g.s, g.dw, g.sw, shapes);
  check_output_size("conv2d", shapes, shape<4>{g.n, g.k, g.oh, g.ow});
  return g;
}

inline pool_geometry pool_geometry_of(const char* op, const shape<4>& x, const extent2& window, const extent2& stride) {
  check_extent_option(op, "window", window, 1);
  check_extent_option(op, "stride", stride, 1);
  const operand_shapes shapes{x};
  pool_geometry g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.wh = std::size_t(window.h), g.ww = std::size_t(window.w), g.sh = std::size_t(stride.h), g.sw = std::size_t(stride.w);
  g.oh = window_positions(op, "height", g.h, 0, g.wh, 1, g.sh, shapes);
  g.ow = window_positions(op, "width", g.w, 0, g.ww, 1, g.sw, shapes);
  check_output_size(op, shapes, shape<4>{g.n, g.c, g.oh, g.ow});
  return g;
}

// ---- kernels (value-returning: backend::transform writes element i) ---------------------------

/// The columns of a batch are [C R S, N P]: row q = (c, r, s) is one filter tap, column n P + p one
/// output position of one image. For each image and output row a tap's row holds a run of
/// neighbouring input elements (contiguous at stride 1), so the host's loops copy and add runs; the
/// products are W [K, CRS] x cols (the outputs as [K, N P]) and their transposes for the gradients.

/// cols[q, n P + p]: the input element under filter tap q at output position p (0 in the padding).
/// By element: a GPU's threads write neighbouring elements.
template <class T>
struct im2col_kernel {
  const T* x;
  conv_geometry g;
  LOCUS_HOST_DEVICE T operator()(std::size_t i) const {
    const std::size_t np = g.n * g.positions(), q = i / np, j = i % np;
    const std::size_t n = j / g.positions(), p = j % g.positions();
    const std::size_t c = q / (g.r * g.s), rs = q % (g.r * g.s);
    const auto y = static_cast<std::int64_t>((p / g.ow) * g.sh + (rs / g.s) * g.dh) - static_cast<std::int64_t>(g.ph);
    const auto xx = static_cast<std::int64_t>((p % g.ow) * g.sw + (rs % g.s) * g.dw) - static_cast<std::int64_t>(g.pw);
    if (y < 0 || xx < 0 || y >= static_cast<std::int64_t>(g.h) || xx >= static_cast<std::int64_t>(g.w)) return T(0);
    return x[((n * g.c + c) * g.h + std::size_t(y)) * g.w + std::size_t(xx)];
  }
};

/// Tests set it to run the GPUs' element kernels on host-run devices too (they are otherwise
/// compiled by nvcc only): the same values from both kernels is what test_conv checks.
inline bool conv_element_kernels_on_host = false;
template <device D>
bool host_kernels() {
  return backend::runs_on_host<D> && !conv_element_kernels_on_host;
}

/// y[n, k, p] = rows[k, n P + p] (+ b[k]).
template <class T>
struct nchw_from_rows_kernel {
  const T* rows;
  const T* bias;  // null: no bias
  std::size_t n, k, positions;
  LOCUS_HOST_DEVICE T operator()(std::size_t i) const {
    const std::size_t nn = i / (k * positions), kk = (i / positions) % k, p = i % positions;
    const T v = rows[(kk * n + nn) * positions + p];
    return bias != nullptr ? v + bias[kk] : v;
  }
};

/// rows[k, n P + p] = g[n, k, p].
template <class T>
struct rows_from_nchw_kernel {
  const T* g;
  std::size_t n, k, positions;
  LOCUS_HOST_DEVICE T operator()(std::size_t i) const {
    const std::size_t kk = i / (n * positions), nn = (i / positions) % n, p = i % positions;
    return g[(nn * k + kk) * positions + p];
  }
};

/// dx[n, c, y, x]: the sum of dcols over every (tap, output position) that read that element, the
/// taps in order (as the host's plane kernel adds them: the same sums).
template <class T>
struct col2im_kernel {
  const T* dcols;
  conv_geometry g;
  LOCUS_HOST_DEVICE T operator()(std::size_t i) const {
    const std::size_t xx = i % g.w, y = (i / g.w) % g.h, c = (i / (g.w * g.h)) % g.c, n = i / (g.w * g.h * g.c);
    const std::size_t np = g.n * g.positions();
    T acc = T(0);
    for (std::size_t r = 0; r < g.r; ++r) {
      const auto ty = static_cast<std::int64_t>(y + g.ph) - static_cast<std::int64_t>(r * g.dh);
      if (ty < 0) continue;
      std::size_t oy = std::size_t(ty);
      if (g.sh != 1) {  // no division for the common stride 1
        if (oy % g.sh != 0) continue;
        oy /= g.sh;
      }
      if (oy >= g.oh) continue;
      for (std::size_t s = 0; s < g.s; ++s) {
        const auto tx = static_cast<std::int64_t>(xx + g.pw) - static_cast<std::int64_t>(s * g.dw);
        if (tx < 0) continue;
        std::size_t ox = std::size_t(tx);
        if (g.sw != 1) {
          if (ox % g.sw != 0) continue;
          ox /= g.sw;
        }
        if (ox >= g.ow) continue;
        acc += dcols[((c * g.r + r) * g.s + s) * np + n * g.positions() + oy * g.ow + ox];
      }
    }
    return acc;
  }
};
/// The offset (within the image plane) of the window's first maximum; NaN is the maximum.
template <class T>
LOCUS_HOST_DEVICE inline std::size_t window_argmax(const T* plane, const pool_geometry& g, std::size_t oy, std::size_t ox) {
  std::size_t best = oy * g.sh * g.w + ox * g.sw;
  T m = plane[best];
  for (std::size_t r = 0; r < g.wh; ++r)
    for (std::size_t s = 0; s < g.ww; ++s) {
      const std::size_t at = (oy * g.sh + r) * g.w + ox * g.sw + s;
      const T v = plane[at];
      if (m == m && (v != v || v > m)) {  // NaN sticks once seen; ties keep the first
        m = v;
        best = at;
      }
    }
  return best;
}

/// Window (oy, ox) of a plane pooled: its first maximum, or its mean.
template <bool Max, class T>
LOCUS_HOST_DEVICE inline T window_value(const T* plane, const pool_geometry& g, std::size_t oy, std::size_t ox) {
  if constexpr (Max) {
    return plane[window_argmax(plane, g, oy, ox)];
  } else {
    T acc = T(0);
    for (std::size_t r = 0; r < g.wh; ++r)
      for (std::size_t s = 0; s < g.ww; ++s) acc += plane[(oy * g.sh + r) * g.w + ox * g.sw + s];
    return acc / static_cast<T>(g.wh * g.ww);
  }
}

template <class T, bool Max>
struct pool_kernel {
  const T* x;
  pool_geometry g;
  LOCUS_HOST_DEVICE T operator()(std::size_t i) const {
    const std::size_t ox = i % g.ow, oy = (i / g.ow) % g.oh, plane = i / (g.ow * g.oh);
    return window_value<Max>(x + plane * g.h * g.w, g, oy, ox);
  }
};

/// dx[plane, y, x]: the sum over the windows that cover (y, x) of dy, where the element was the
/// window's first maximum (Max) or divided by the window's size (average).
template <class T, bool Max>
struct pool_backward_kernel {
  const T* x;
  const T* dy;
  pool_geometry g;
  LOCUS_HOST_DEVICE T operator()(std::size_t i) const {
    const std::size_t xx = i % g.w, y = (i / g.w) % g.h, plane = i / (g.w * g.h);
    // Windows oy with oy sh <= y < oy sh + wh.
    const std::size_t oy_lo = y + 1 > g.wh ? (y + 1 - g.wh + g.sh - 1) / g.sh : 0;
    const std::size_t ox_lo = xx + 1 > g.ww ? (xx + 1 - g.ww + g.sw - 1) / g.sw : 0;
    const std::size_t oy_hi = y / g.sh < g.oh ? y / g.sh : g.oh - 1;
    const std::size_t ox_hi = xx / g.sw < g.ow ? xx / g.sw : g.ow - 1;
    const T* px = x + plane * g.h * g.w;
    const T* pdy = dy + plane * g.oh * g.ow;
    T acc = T(0);
    for (std::size_t oy = oy_lo; oy <= oy_hi && oy < g.oh; ++oy)
      for (std::size_t ox = ox_lo; ox <= ox_hi && ox < g.ow; ++ox) {
        if constexpr (Max) {
          if (window_argmax(px, g, oy, ox) == y * g.w + xx) acc += pdy[oy * g.ow + ox];
        } else {
          acc += pdy[oy * g.ow + ox];
        }
      }
    if constexpr (Max) return acc;
    else return acc / static_cast<T>(g.wh * g.ww);
  }
};

// ---- host-run devices: one plane or row per task, loops without divisions ------------------
// (By element, each output paid six to eight 64-bit divisions for its indices: pooling's gradient
// alone took a fifth of a CNN's step.) Each task writes its own plane or row only: no races, and
// sums in a fixed order (the same results for any thread count).

/// The output columns [lo, hi) of a tap whose input column is ox sw + offset that fall inside
/// [0, w) (the others read the padding).
LOCUS_HOST_DEVICE inline void tap_span(std::int64_t offset, std::size_t stride, std::size_t w, std::size_t ow,
                                       std::size_t& lo, std::size_t& hi) {
  const auto st = static_cast<std::int64_t>(stride), width = static_cast<std::int64_t>(w);
  const std::int64_t first = offset >= 0 ? 0 : (-offset + st - 1) / st;
  const std::int64_t end = width - offset <= 0 ? 0 : (width - offset + st - 1) / st;
  lo = std::size_t(first) < ow ? std::size_t(first) : ow;
  hi = std::size_t(end) < ow ? std::size_t(end) : ow;
  if (hi < lo) hi = lo;
}

/// The walk im2col and col2im share: for each tap (r, s) of channel c of image n, in order, and each
/// output row oy, f(col, y, lo, hi, xoff) with col the offset of that row of outputs in the
/// [C R S, N P] columns, y the input row it reads (-1 in the padding), [lo, hi) the outputs whose
/// input column ox sw + xoff is inside the row.
template <class F>
LOCUS_HOST_DEVICE inline void for_each_tap_row(const conv_geometry& g, std::size_t n, std::size_t c, const F& f) {
  const std::size_t np = g.n * g.positions();
  const auto h = static_cast<std::int64_t>(g.h);
  for (std::size_t r = 0; r < g.r; ++r)
    for (std::size_t s = 0; s < g.s; ++s) {
      const std::size_t col = ((c * g.r + r) * g.s + s) * np + n * g.positions();
      const std::int64_t xoff = static_cast<std::int64_t>(s * g.dw) - static_cast<std::int64_t>(g.pw);
      std::size_t lo = 0, hi = 0;
      tap_span(xoff, g.sw, g.w, g.ow, lo, hi);
      for (std::size_t oy = 0; oy < g.oh; ++oy) {
        const std::int64_t y = static_cast<std::int64_t>(oy * g.sh + r * g.dh) - static_cast<std::int64_t>(g.ph);
        f(col + oy * g.ow, y < 0 || y >= h ? std::int64_t(-1) : y, lo, hi, xoff);
      }
    }
}

/// cols[(c, r, s), n P + :] for every tap of channel c of image n: task (n, c). Each output row of a
/// tap is a run of input elements (contiguous at stride 1) between runs of padding zeros.
template <class T>
struct im2col_plane_kernel {
  const T* x;
  T* cols;
  conv_geometry g;
  LOCUS_HOST_DEVICE void operator()(std::size_t task) const {
    const T* plane = x + task * g.h * g.w;
    for_each_tap_row(g, task / g.c, task % g.c,
                     [&](std::size_t col, std::int64_t y, std::size_t lo, std::size_t hi, std::int64_t xoff) {
                       T* out = cols + col;
                       if (y < 0) {
                         for (std::size_t ox = 0; ox < g.ow; ++ox) out[ox] = T(0);
                         return;
                       }
                       const T* in = plane + std::size_t(y) * g.w;
                       for (std::size_t ox = 0; ox < lo; ++ox) out[ox] = T(0);
                       if (g.sw == 1) {
                         for (std::size_t ox = lo; ox < hi; ++ox) out[ox] = in[std::int64_t(ox) + xoff];
                       } else {
                         for (std::size_t ox = lo; ox < hi; ++ox) out[ox] = in[std::int64_t(ox * g.sw) + xoff];
                       }
                       for (std::size_t ox = hi; ox < g.ow; ++ox) out[ox] = T(0);
                     });
  }
};

/// cols = im2col(x) on D: by plane on host-run devices, by element on CUDA GPUs.
template <class T, device D>
void im2col(const T* x, T* cols, const conv_geometry& g) {
  if (host_kernels<D>())
    backend::for_each_index<D>(g.n * g.c, im2col_plane_kernel<T>{x, cols, g}, g.r * g.s * g.positions());
  else
    backend::transform<D>(g.n * g.positions() * g.patch(), im2col_kernel<T>{x, g}, cols);
}

/// y[n, k, :] from rows[k, n P + :] (+ b[k]): task (n, k).
template <class T>
struct nchw_plane_kernel {
  const T* rows;
  const T* bias;
  T* y;
  std::size_t n, k, positions;
  LOCUS_HOST_DEVICE void operator()(std::size_t plane) const {
    const std::size_t nn = plane / k, kk = plane % k;
    const T* in = rows + (kk * n + nn) * positions;
    T* out = y + plane * positions;
    if (bias != nullptr) {
      const T b = bias[kk];
      for (std::size_t p = 0; p < positions; ++p) out[p] = in[p] + b;
    } else {
      for (std::size_t p = 0; p < positions; ++p) out[p] = in[p];
    }
  }
};

/// rows[k, n P + :] from g[n, k, :]: task (n, k).
template <class T>
struct rows_plane_kernel {
  const T* g;
  T* rows;
  std::size_t n, k, positions;
  LOCUS_HOST_DEVICE void operator()(std::size_t plane) const {
    const std::size_t nn = plane / k, kk = plane % k;
    const T* in = g + plane * positions;
    T* out = rows + (kk * n + nn) * positions;
    for (std::size_t p = 0; p < positions; ++p) out[p] = in[p];
  }
};

/// dx[n, c, :, :]: dcols added back tap by tap, the taps in order, into a zeroed plane: task (n, c).
template <class T>
struct col2im_plane_kernel {
  const T* dcols;
  T* dx;
  conv_geometry g;
  LOCUS_HOST_DEVICE void operator()(std::size_t plane) const {
    T* out = dx + plane * g.h * g.w;
    for (std::size_t i = 0; i < g.h * g.w; ++i) out[i] = T(0);
    for_each_tap_row(g, plane / g.c, plane % g.c,
                     [&](std::size_t col, std::int64_t y, std::size_t lo, std::size_t hi, std::int64_t xoff) {
                       if (y < 0) return;
                       const T* in = dcols + col;
                       T* row = out + std::size_t(y) * g.w;
                       if (g.sw == 1) {
                         for (std::size_t ox = lo; ox < hi; ++ox) row[std::int64_t(ox) + xoff] += in[ox];
                       } else {
                         for (std::size_t ox = lo; ox < hi; ++ox) row[std::int64_t(ox * g.sw) + xoff] += in[ox];
                       }
                     });
  }
};

/// take ? x : y through masks on the bits (float, double or an unsigned index).
template <class V>
LOCUS_HOST_DEVICE inline V masked_select(bool take, V x, V y) {
  using U = std::conditional_t<sizeof(V) == 4, std::uint32_t, std::uint64_t>;
  static_assert(sizeof(V) == sizeof(U), "locus: masked_select takes 4- or 8-byte values");
  const U m = U(0) - static_cast<U>(take);
  return std::bit_cast<V>(static_cast<U>((std::bit_cast<U>(x) & m) | (std::bit_cast<U>(y) & ~m)));
}

/// m, k <- the first maximum of (m, k) and tap (v, j), NaN the maximum once seen; ties keep (m, k);
/// through masks, no branch to mispredict (K an unsigned integer, as wide as T for shared lanes).
template <class T, class K>
LOCUS_HOST_DEVICE inline void take_larger(T v, K j, T& m, K& k) {
  const bool take = (m == m) & ((v != v) | (v > m));
  m = masked_select(take, v, m);
  k = masked_select(take, j, k);
}

/// Host pooling works on blocks of this many windows of one output row.
inline constexpr std::size_t row_block = 64;

/// The first maximum (NaN wins) of the windows [ox0, ox0 + m) of output row oy (m <= row_block):
/// its offset in the plane into at[], its value into best[]. The same comparisons in the same order
/// as window_argmax, but tap by tap across the row with selects instead of branches (which of a
/// window's elements is largest is data, and mispredicted branches cost more than the loads).
template <class T>
LOCUS_HOST_DEVICE inline void row_argmax(const T* plane, const pool_geometry& g, std::size_t oy, std::size_t ox0,
                                         std::size_t m, std::size_t* at, T* best) {
  for (std::size_t j = 0; j < m; ++j) {
    at[j] = oy * g.sh * g.w + (ox0 + j) * g.sw;
    best[j] = plane[at[j]];
  }
  for (std::size_t r = 0; r < g.wh; ++r)
    for (std::size_t s = 0; s < g.ww; ++s) {
      const std::size_t base = (oy * g.sh + r) * g.w + ox0 * g.sw + s;
      for (std::size_t j = 0; j < m; ++j) {
        const std::size_t a = base + j * g.sw;
        take_larger(plane[a], a, best[j], at[j]);
      }
    }
}

/// f(o, at, value) for every window o = oy ow + ox of the plane, in order: the offset and the value of
/// its first maximum (row_argmax, a block of windows at a time).
template <class T, class F>
LOCUS_HOST_DEVICE inline void for_each_window_max(const T* plane, const pool_geometry& g, const F& f) {
  for (std::size_t oy = 0; oy < g.oh; ++oy)
    for (std::size_t ox0 = 0; ox0 < g.ow; ox0 += row_block) {
      const std::size_t m = g.ow - ox0 < row_block ? g.ow - ox0 : row_block;
      std::size_t at[row_block];
      T best[row_block];
      row_argmax(plane, g, oy, ox0, m, at, best);
      for (std::size_t j = 0; j < m; ++j) f(oy * g.ow + ox0 + j, at[j], best[j]);
    }
}

/// Windows 2x2 at stride 2 (max_pool2d(x, 2), a CNN's usual pooling) get loops of their own: the
/// four taps of window ox of output row oy are a0 = row0[2 ox], a1 = row0[2 ox + 1], a2 = row1[2 ox],
/// a3 = row1[2 ox + 1] (row0, row1 the input rows 2 oy and 2 oy + 1), compared in window_argmax's
/// order through selects, so the compiler runs a row of windows in vector lanes.
LOCUS_HOST_DEVICE inline bool is_2x2_stride_2(const pool_geometry& g) {
  return g.wh == 2 && g.ww == 2 && g.sh == 2 && g.sw == 2;
}

template <class T>
using tap_index = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

/// Window ox of a 2x2 row: its first maximum into m, the tap holding it (0..3, row-major) into k.
template <class T>
LOCUS_HOST_DEVICE inline void max_2x2(const T* row0, const T* row1, std::size_t ox, T& m, tap_index<T>& k) {
  using K = tap_index<T>;
  m = row0[2 * ox];
  k = 0;
  take_larger(row0[2 * ox + 1], K(1), m, k);
  take_larger(row1[2 * ox], K(2), m, k);
  take_larger(row1[2 * ox + 1], K(3), m, k);
}

/// Windows ox in [0, ow) of one 2x2 row: their maxima into y.
template <class T>
LOCUS_HOST_DEVICE inline void max_2x2_row(const T* row0, const T* row1, std::size_t ow, T* y) {
  for (std::size_t ox = 0; ox < ow; ++ox) {
    T m;
    tap_index<T> k;
    max_2x2(row0, row1, ox, m, k);
    y[ox] = m;
  }
}

/// The gradient of one 2x2 row: each tap of window ox gets dy[ox] where it is the window's first
/// maximum and 0 elsewhere; a window's taps are read by no other window, so each element of the two
/// gradient rows is written once (dy + 0: the sum a zeroed plane would hold, -0 becomes +0).
template <class T>
LOCUS_HOST_DEVICE inline void max_2x2_row_backward(const T* row0, const T* row1, const T* dy, std::size_t ow, T* dx0,
                                                   T* dx1) {
  for (std::size_t ox = 0; ox < ow; ++ox) {
    T m;
    tap_index<T> k;
    max_2x2(row0, row1, ox, m, k);
    const T d = dy[ox] + T(0);
    dx0[2 * ox] = masked_select(k == 0, d, T(0));
    dx0[2 * ox + 1] = masked_select(k == 1, d, T(0));
    dx1[2 * ox] = masked_select(k == 2, d, T(0));
    dx1[2 * ox + 1] = masked_select(k == 3, d, T(0));
  }
}

/// Windows ox in [0, ow) of one 2x2 row: their means into y (summed in window_value's order).
template <class T>
LOCUS_HOST_DEVICE inline void avg_2x2_row(const T* row0, const T* row1, std::size_t ow, T* y) {
  for (std::size_t ox = 0; ox < ow; ++ox)
    y[ox] = (T(0) + row0[2 * ox] + row0[2 * ox + 1] + row1[2 * ox] + row1[2 * ox + 1]) / T(4);
}

/// Pooling of one plane: task (n, c).
template <class T, bool Max>
struct pool_plane_kernel {
  const T* x;
  T* y;
  pool_geometry g;
  LOCUS_HOST_DEVICE void operator()(std::size_t plane) const {
    const T* px = x + plane * g.h * g.w;
    T* py = y + plane * g.oh * g.ow;
    if constexpr (Max) {
      if (is_2x2_stride_2(g)) {
        for (std::size_t oy = 0; oy < g.oh; ++oy) max_2x2_row(px + 2 * oy * g.w, px + (2 * oy + 1) * g.w, g.ow, py + oy * g.ow);
        return;
      }
      for_each_window_max(px, g, [&](std::size_t o, std::size_t, T v) { py[o] = v; });
    } else {
      if (is_2x2_stride_2(g)) {
        for (std::size_t oy = 0; oy < g.oh; ++oy) avg_2x2_row(px + 2 * oy * g.w, px + (2 * oy + 1) * g.w, g.ow, py + oy * g.ow);
        return;
      }
      for (std::size_t oy = 0; oy < g.oh; ++oy)
        for (std::size_t ox = 0; ox < g.ow; ++ox) py[oy * g.ow + ox] = window_value<Max>(px, g, oy, ox);
    }
  }
};

/// Pooling's gradient for one plane: each window's dy scattered into a zeroed plane: task (n, c).
template <class T, bool Max>
struct pool_plane_backward_kernel {
  const T* x;
  const T* dy;
  T* dx;
  pool_geometry g;
  LOCUS_HOST_DEVICE void operator()(std::size_t plane) const {
    const T* px = x + plane * g.h * g.w;
    const T* pdy = dy + plane * g.oh * g.ow;
    T* pdx = dx + plane * g.h * g.w;
    if (g.sh == g.wh && g.sw == g.ww) {  // windows that tile: each element written once, no zeroing first
      tiled_backward(px, pdy, pdx);
      return;
    }
    for (std::size_t i = 0; i < g.h * g.w; ++i) pdx[i] = T(0);
    if constexpr (Max) {
      for_each_window_max(px, g, [&](std::size_t o, std::size_t at, T) { pdx[at] += pdy[o]; });
    } else {
      const T area = static_cast<T>(g.wh * g.ww);
      for (std::size_t oy = 0; oy < g.oh; ++oy)
        for (std::size_t ox = 0; ox < g.ow; ++ox) {
          const T d = pdy[oy * g.ow + ox];
          for (std::size_t r = 0; r < g.wh; ++r)
            for (std::size_t s = 0; s < g.ww; ++s) pdx[(oy * g.sh + r) * g.w + ox * g.sw + s] += d / area;
        }
    }
  }

private:
  /// Windows with stride = window cover each element once at most: every window writes its own
  /// elements (dy to its first maximum, or dy / area to each, plus 0: what a zeroed plane would hold
  /// after the scatter), then the rows and columns no window reaches get 0.
  LOCUS_HOST_DEVICE void tiled_backward(const T* px, const T* pdy, T* pdx) const {
    const std::size_t covered_w = g.ow * g.ww;
    for (std::size_t oy = 0; oy < g.oh; ++oy) {
      if constexpr (Max) {
        if (is_2x2_stride_2(g)) {
          max_2x2_row_backward(px + 2 * oy * g.w, px + (2 * oy + 1) * g.w, pdy + oy * g.ow, g.ow, pdx + 2 * oy * g.w,
                               pdx + (2 * oy + 1) * g.w);
        } else {
          for (std::size_t ox0 = 0; ox0 < g.ow; ox0 += row_block) {
            const std::size_t m = g.ow - ox0 < row_block ? g.ow - ox0 : row_block;
            std::size_t at[row_block];
            T best[row_block];
            row_argmax(px, g, oy, ox0, m, at, best);
            for (std::size_t r = 0; r < g.wh; ++r)
              for (std::size_t j = 0; j < m; ++j) {
                const T d = pdy[oy * g.ow + ox0 + j] + T(0);
                const std::size_t base = (oy * g.sh + r) * g.w + (ox0 + j) * g.sw;
                for (std::size_t s = 0; s < g.ww; ++s) pdx[base + s] = base + s == at[j] ? d : T(0);
              }
          }
        }
      } else {
        const T area = static_cast<T>(g.wh * g.ww);
        for (std::size_t r = 0; r < g.wh; ++r) {
          T* row = pdx + (oy * g.sh + r) * g.w;
          const T* d = pdy + oy * g.ow;
          if (g.ww == 2) {
            for (std::size_t ox = 0; ox < g.ow; ++ox) row[2 * ox] = row[2 * ox + 1] = d[ox] / area + T(0);
          } else {
            for (std::size_t ox = 0; ox < g.ow; ++ox)
              for (std::size_t s = 0; s < g.ww; ++s) row[ox * g.ww + s] = d[ox] / area + T(0);
          }
        }
      }
      for (std::size_t r = 0; r < g.wh; ++r)
        for (std::size_t i = covered_w; i < g.w; ++i) pdx[(oy * g.sh + r) * g.w + i] = T(0);
    }
    for (std::size_t i = g.oh * g.wh * g.w; i < g.h * g.w; ++i) pdx[i] = T(0);
  }
};

template <class T>
constexpr void check_conv_type() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "locus: conv2d and pooling take float or double tensors (bfloat16 or half ones: cast<float>(x) first)");
}

/// A missing bias: no operand, nothing to log or place.
struct no_bias {
  using devices = expr::type_list<>;
  using operations = expr::type_list<>;
  template <class V>
  void visit(V&) const {}
  template <class F>
  [[nodiscard]] no_bias rebind(F&) const {
    return *this;
  }
};

/// The backward of a convolution (gradients of x, w and b for the gradient g of its result), on D.
template <class T, device D>
struct conv_gradients {
  tensor<T, D, 4> dx;
  tensor<T, D, 4> dw;
  tensor<T, D, 1> db;
};

template <class T, device D>
conv_gradients<T, D> conv2d_backward_on(const T* x, const T* w, const T* g, const conv_geometry& geo, bool want_dx,
                                        bool want_dw, bool want_db) {
  const std::size_t np = geo.n * geo.positions(), patch = geo.patch();
  conv_gradients<T, D> out;
  auto gk = tensor<T, D, 2>::uninitialized_of(shape{geo.k, np});  // g as [K, N P]
  if (host_kernels<D>())
    backend::for_each_index<D>(geo.n * geo.k, rows_plane_kernel<T>{g, gk.data(), geo.n, geo.k, geo.positions()},
                               geo.positions());
  else
    backend::transform<D>(gk.size(), rows_from_nchw_kernel<T>{g, geo.n, geo.k, geo.positions()}, gk.data());
  if (want_dw) {  // dW [K, CRS] = g [K, N P] cols^T
    auto cols = tensor<T, D, 2>::uninitialized_of(shape{patch, np});
    im2col<T, D>(x, cols.data(), geo);
    out.dw = tensor<T, D, 4>::uninitialized_of(shape{geo.k, geo.c, geo.r, geo.s});
    backend::gemm<D>(false, true, geo.k, patch, np, T(1), gk.data(), np, cols.data(), np, T(0), out.dw.data(), patch);
  }
  if (want_dx) {  // dcols [CRS, N P] = W^T g
    auto dcols = tensor<T, D, 2>::uninitialized_of(shape{patch, np});
    backend::gemm<D>(true, false, patch, np, geo.k, T(1), w, patch, gk.data(), np, T(0), dcols.data(), np);
    out.dx = tensor<T, D, 4>::uninitialized_of(shape{geo.n, geo.c, geo.h, geo.w});
    if (host_kernels<D>())
      backend::for_each_index<D>(geo.n * geo.c, col2im_plane_kernel<T>{dcols.data(), out.dx.data(), geo},
                                 geo.r * geo.s * geo.positions() + geo.h * geo.w);
    else
      backend::transform<D>(out.dx.size(), col2im_kernel<T>{dcols.data(), geo}, out.dx.data());
  }
  if (want_db) out.db = on<D>(sum<1>(gk));
  return out;
}

template <class T, bool Max, device D>
tensor<T, D, 4> pool_backward_on(const T* x, const T* dy, const pool_geometry& geo) {
  auto dx = tensor<T, D, 4>::uninitialized_of(shape{geo.n, geo.c, geo.h, geo.w});
  if (host_kernels<D>())
    backend::for_each_index<D>(geo.n * geo.c, pool_plane_backward_kernel<T, Max>{x, dy, dx.data(), geo}, geo.h * geo.w);
  else
    backend::transform<D>(dx.size(), pool_backward_kernel<T, Max>{x, dy, geo}, dx.data());
  return dx;
}

}  // namespace detail

namespace expr {

/// conv2d(x, w[, b], options): see the top of this file. LX, LW: memory leaves or staged operands;
/// LB: the same, or detail::no_bias.
template <class LX, class LW, class LB>
struct conv2d_expr {
  using locus_special = void;
  using value_type = typename LX::value_type;
  static constexpr int rank = 4;
  static constexpr bool has_bias = !std::is_same_v<LB, locus::detail::no_bias>;
  using devices = merge_t<typename LX::devices, typename LW::devices, typename LB::devices>;
  using operations = merge_t<type_list<operation<ops::conv2d, value_type>>, typename LX::operations,
                             typename LW::operations, typename LB::operations>;
  static constexpr bool has_staged = has_staged_v<LX> || has_staged_v<LW> || has_staged_v<LB>;
  static constexpr bool has_var = false;

  LX x;
  LW w;
  LB b;
  locus::detail::conv_geometry geometry;

  conv2d_expr(LX x_, LW w_, LB b_, const conv2d_options& o)
      : x(std::move(x_)), w(std::move(w_)), b(std::move(b_)),
        geometry(locus::detail::conv_geometry_of(x.shape(), w.shape(), o)) {
    if constexpr (has_bias)
      if (b.shape()[0] != geometry.k)
        throw shape_error("locus: conv2d: a bias of shape " + b.shape().str() + " for filters of shape " + w.shape().str() +
                          " (one value per output channel: [" + std::to_string(geometry.k) + "])");
  }
  /// The same convolution over rebound operands (same shapes): the geometry is kept, not checked again.
  conv2d_expr(LX x_, LW w_, LB b_, const locus::detail::conv_geometry& g)
      : x(std::move(x_)), w(std::move(w_)), b(std::move(b_)), geometry(g) {}

  [[nodiscard]] locus::shape<4> shape() const { return {geometry.n, geometry.k, geometry.oh, geometry.ow}; }

  template <class V>
  void visit(V& v) const {
    x.visit(v);
    w.visit(v);
    b.visit(v);
    v.op(ops::conv2d::name, ops::conv2d::type);
  }
  template <class F>
  [[nodiscard]] auto rebind(F& f) const {
    auto rx = x.rebind(f);
    auto rw = w.rebind(f);
    auto rb = b.rebind(f);
    return conv2d_expr<decltype(rx), decltype(rw), decltype(rb)>(std::move(rx), std::move(rw), std::move(rb), geometry);
  }

  template <device D>
  void write(const tensor_view<value_type, D, 4>& out) const {
    using T = value_type;
    const auto& g = geometry;
    const std::size_t np = g.n * g.positions(), patch = g.patch();
    const T* pb = nullptr;
    if constexpr (has_bias) pb = b.kernel().p;
    auto cols = tensor<T, D, 2>::uninitialized_of(locus::shape<2>{patch, np});
    locus::detail::im2col<T, D>(x.kernel().p, cols.data(), g);
    auto yk = tensor<T, D, 2>::uninitialized_of(locus::shape<2>{g.k, np});  // W [K, CRS] cols: [K, N P]
    backend::gemm<D>(false, false, g.k, np, patch, T(1), w.kernel().p, patch, cols.data(), np, T(0), yk.data(), np);
    if (locus::detail::host_kernels<D>())
      backend::for_each_index<D>(g.n * g.k,
                                 locus::detail::nchw_plane_kernel<T>{yk.data(), pb, out.data(), g.n, g.k, g.positions()},
                                 g.positions());
    else
      backend::transform<D>(out.size(), locus::detail::nchw_from_rows_kernel<T>{yk.data(), pb, g.n, g.k, g.positions()},
                            out.data());
  }
};

/// max_pool2d / avg_pool2d over a memory leaf or staged operand.
template <class Op, class LX>
struct pool2d_expr {
  using locus_special = void;
  using value_type = typename LX::value_type;
  static constexpr int rank = 4;
  using devices = typename LX::devices;
  using operations = merge_t<type_list<operation<Op, value_type>>, typename LX::operations>;
  static constexpr bool has_staged = has_staged_v<LX>;
  static constexpr bool has_var = false;

  LX x;
  locus::detail::pool_geometry geometry;

  pool2d_expr(LX x_, extent2 window, extent2 stride)
      : x(std::move(x_)), geometry(locus::detail::pool_geometry_of(Op::name, x.shape(), window, stride)) {}
  /// The same pooling over a rebound operand (same shape): the geometry is kept.
  pool2d_expr(LX x_, const locus::detail::pool_geometry& g) : x(std::move(x_)), geometry(g) {}

  [[nodiscard]] locus::shape<4> shape() const { return {geometry.n, geometry.c, geometry.oh, geometry.ow}; }
  template <class V>
  void visit(V& v) const {
    x.visit(v);
    v.op(Op::name, Op::type);
  }
  template <class F>
  [[nodiscard]] auto rebind(F& f) const {
    auto rx = x.rebind(f);
    return pool2d_expr<Op, decltype(rx)>(std::move(rx), geometry);
  }
  template <device D>
  void write(const tensor_view<value_type, D, 4>& out) const {
    constexpr bool is_max = std::is_same_v<Op, ops::max_pool2d>;
    if (locus::detail::host_kernels<D>())
      backend::for_each_index<D>(geometry.n * geometry.c,
                                 locus::detail::pool_plane_kernel<value_type, is_max>{x.kernel().p, out.data(), geometry},
                                 geometry.h * geometry.w);
    else
      backend::transform<D>(out.size(), locus::detail::pool_kernel<value_type, is_max>{x.kernel().p, geometry},
                            out.data());
  }
};

/// reshape(e, shape) of an expression (not a tensor or view: those reshape as views, tensor/slice.hpp):
/// its value copied into the new shape.
template <class LX, int R>
struct reshaped_expr {
  using locus_special = void;
  using value_type = typename LX::value_type;
  static constexpr int rank = R;
  using devices = typename LX::devices;
  using operations = typename LX::operations;
  static constexpr bool has_staged = has_staged_v<LX>;
  static constexpr bool has_var = false;

  LX x;
  locus::shape<R> to;

  reshaped_expr(LX x_, locus::shape<R> s) : x(std::move(x_)), to(s) {
    if (to.size_overflows() || to.size() != x.shape().size())
      throw shape_error("locus: reshape: an expression of shape " + x.shape().str() + " (" +
                        std::to_string(x.shape().size()) + " elements) into shape " + to.str());
  }
  [[nodiscard]] const locus::shape<R>& shape() const { return to; }
  template <class V>
  void visit(V& v) const {
    x.visit(v);
  }
  template <class F>
  [[nodiscard]] auto rebind(F& f) const {
    auto rx = x.rebind(f);
    return reshaped_expr<decltype(rx), R>(std::move(rx), to);
  }
  template <device D>
  void write(const tensor_view<value_type, D, R>& out) const {
    backend::copy(id_of<D>, out.data(), id_of<D>, x.kernel().p, out.size() * sizeof(value_type));
  }
};

namespace detail {
/// The element-type and rank rules of conv2d(x, w, ...), for nodes and ad's vars alike.
template <class X, class W>
constexpr void check_conv_operands() {
  static_assert(X::rank == 4 && W::rank == 4, "locus: conv2d(x, w): x is [N, C, H, W] and w [K, C, R, S], both rank 4");
  static_assert(std::is_same_v<typename X::value_type, typename W::value_type>,
                "locus: conv2d(x, w): x and w must have the same element type");
  locus::detail::check_conv_type<typename X::value_type>();
}
template <class X, class B>
constexpr void check_conv_bias_operand() {
  static_assert(B::rank == 1 && std::is_same_v<typename X::value_type, typename B::value_type>,
                "locus: conv2d(x, w, b): b is [K], of x's element type");
}
}  // namespace detail

/// conv2d(x, w, options) of tensors, views or expressions without variables (those are locus::ad's).
template <class X, class W>
  requires(!has_var_v<std::remove_cvref_t<X>> && !has_var_v<std::remove_cvref_t<W>>)
[[nodiscard]] auto conv2d(X&& x, W&& w, const conv2d_options& o = {}) {
  auto nx = memory_operand(std::forward<X>(x));
  auto nw = memory_operand(std::forward<W>(w));
  detail::check_conv_operands<decltype(nx), decltype(nw)>();
  return conv2d_expr<decltype(nx), decltype(nw), locus::detail::no_bias>(std::move(nx), std::move(nw), {}, o);
}
/// conv2d(x, w, b, options): with a bias b [K] added to every output of channel k.
template <class X, class W, class B>
  requires(!has_var_v<std::remove_cvref_t<X>> && !has_var_v<std::remove_cvref_t<W>> &&
           !has_var_v<std::remove_cvref_t<B>> && !std::is_same_v<std::remove_cvref_t<B>, conv2d_options>)
[[nodiscard]] auto conv2d(X&& x, W&& w, B&& b, const conv2d_options& o = {}) {
  auto nx = memory_operand(std::forward<X>(x));
  auto nw = memory_operand(std::forward<W>(w));
  auto nb = memory_operand(std::forward<B>(b));
  detail::check_conv_operands<decltype(nx), decltype(nw)>();
  detail::check_conv_bias_operand<decltype(nx), decltype(nb)>();
  return conv2d_expr<decltype(nx), decltype(nw), decltype(nb)>(std::move(nx), std::move(nw), std::move(nb), o);
}

template <class Op, class X>
auto pool2d(X&& x, extent2 window, extent2 stride) {
  auto nx = memory_operand(std::forward<X>(x));
  using NX = decltype(nx);
  static_assert(NX::rank == 4, "locus: max_pool2d(x, window) and avg_pool2d(x, window): x is [N, C, H, W], rank 4");
  locus::detail::check_conv_type<typename NX::value_type>();
  return pool2d_expr<Op, NX>(std::move(nx), window, stride);
}

/// max_pool2d(x, window[, stride]): each window's maximum (stride: the window by default; each
/// may be `2` or `{2, 1}`).
template <class X>
  requires(!has_var_v<std::remove_cvref_t<X>>)
[[nodiscard]] auto max_pool2d(X&& x, extent2 window) {
  return pool2d<ops::max_pool2d>(std::forward<X>(x), window, window);
}
template <class X>
  requires(!has_var_v<std::remove_cvref_t<X>>)
[[nodiscard]] auto max_pool2d(X&& x, extent2 window, extent2 stride) {
  return pool2d<ops::max_pool2d>(std::forward<X>(x), window, stride);
}
/// avg_pool2d(x, window[, stride]): each window's mean.
template <class X>
  requires(!has_var_v<std::remove_cvref_t<X>>)
[[nodiscard]] auto avg_pool2d(X&& x, extent2 window) {
  return pool2d<ops::avg_pool2d>(std::forward<X>(x), window, window);
}
template <class X>
  requires(!has_var_v<std::remove_cvref_t<X>>)
[[nodiscard]] auto avg_pool2d(X&& x, extent2 window, extent2 stride) {
  return pool2d<ops::avg_pool2d>(std::forward<X>(x), window, stride);
}

/// reshape(e, s) of an expression (a product, a convolution, an elementwise tree): evaluated, then
/// read in shape s. Tensors and views reshape without a copy (tensor/slice.hpp).
template <class X, int R>
  requires(!has_var_v<std::remove_cvref_t<X>> && !locus::detail::is_tensor<std::remove_cvref_t<X>>::value &&
           !locus::detail::is_tensor_view<std::remove_cvref_t<X>>::value && operand<X>)
[[nodiscard]] auto reshape(X&& x, locus::shape<R> s) {
  auto nx = memory_operand(std::forward<X>(x));
  return reshaped_expr<decltype(nx), R>(std::move(nx), s);
}

}  // namespace expr

using expr::avg_pool2d;
using expr::conv2d;
using expr::max_pool2d;
using expr::reshape;

}  // namespace locus
