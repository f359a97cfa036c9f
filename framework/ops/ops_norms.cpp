// The normalisations over the last axis (D): layer_norm, rms_norm and l2_norm. Rows are
// independent, so forward and backward parallelise over rows; the common row widths run loops
// compiled for them (with_width), with the bits of the loop for any width.
#include <omp.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/runtime/runtime.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/rows.hpp"

namespace tri {

namespace {

void check_affine(const char* op, const Tensor& x, const Tensor& p, const char* what) {
  if (p.defined() && (p.dim() != 1 || p.size(0) != x.size(-1)))
    throw Error(std::string(op) + ": " + what + " " + p.shape().str() + " does not match input " +
                x.shape().str() + " (expected [" + std::to_string(x.size(-1)) + "])");
}

// The tensors a norm's backward reads: x, and the weight when there is one.
std::vector<Tensor> saved_with(const Tensor& x, const Tensor& weight) {
  if (weight.defined()) return {x, weight};
  return {x};
}
}  // namespace

namespace {

// The norms' forward takes rows in blocks: the statistics of a block's rows first, then their
// 1 / sqrt(var + eps) together, then the rows' outputs. Row by row, each row waited on its own
// square root and division.
constexpr int64_t kNormRows = 16;

// rstd[i] = float(1 / sqrt(sums[i] / D + eps)) for n <= kNormRows rows, on vectors of eight
// doubles: square roots and divisions are correctly rounded, so each lane has the scalar bits.
inline void inverse_stds(int64_t n, const double* sums, int64_t D, float eps, float* rstd) {
  int64_t i = 0;
#ifdef __AVX512F__
  for (; i + 8 <= n; i += 8) {
    const __m512d var = _mm512_add_pd(_mm512_div_pd(_mm512_loadu_pd(sums + i), _mm512_set1_pd(double(D))),
                                      _mm512_set1_pd(double(eps)));
    _mm256_storeu_ps(rstd + i, _mm512_maskz_cvtpd_ps(0xff, _mm512_div_pd(_mm512_set1_pd(1.0), _mm512_maskz_sqrt_pd(0xff, var))));
  }
#endif
  for (; i < n; ++i) rstd[i] = float(1.0 / std::sqrt(sums[i] / double(D) + eps));
}

// Column sums of a norm's weight (and bias) gradients, the columns split across threads when
// `threaded` (one contiguous range each, whole blocks of 16), every column summed over the rows
// in order: the same bits at any split. row(r, j0, width, acc) adds row r's terms for columns
// [j0, j0 + width) to acc (`sums` arrays of width floats; unthreaded, it may also take the row's
// d x, in the same pass); done(j0, width, acc) adds them on.
template <class Row, class Done>
void column_sums(int64_t rows, int64_t D, int sums, bool threaded, Row row, Done done) {
#pragma omp parallel if (threaded)
  {
    const int64_t n = omp_get_num_threads(), t = omp_get_thread_num(), blocks = (D + 15) / 16;
    const int64_t j0 = blocks * t / n * 16, width = std::min(D, blocks * (t + 1) / n * 16) - j0;
    if (width > 0) {
      std::vector<float> acc(size_t(sums * width), 0.f);
      for (int64_t r = 0; r < rows; ++r) row(r, j0, width, acc.data());
      done(j0, width, acc.data());
    }
  }
}

// Eight floats, and their row_sum partials as eight doubles. Loads through a type that may
// alias floats, needing only float alignment.
using Floats8 = float __attribute__((vector_size(32), aligned(4), may_alias));
using Doubles8 = double __attribute__((vector_size(64)));
inline Floats8 load8(const float* p) { return *reinterpret_cast<const Floats8*>(p); }
inline Doubles8 wide(Floats8 x) { return __builtin_convertvector(x, Doubles8); }

// row_sum(D, term) with the terms of eight columns at once (terms8(j): columns j .. j + 7, as
// doubles): lane u takes j = u mod 8, as row_sum's partial u, so the same sum. GCC leaves
// row_sum's lambda form scalar.
template <class Terms8, class Term>
inline double row_sum8(int64_t D, Terms8 terms8, Term term) {
  const int64_t whole = D / 8 * 8;
  Doubles8 p{};
  for (int64_t j = 0; j < whole; j += 8) p += terms8(j);
  double s = 0;
  for (int u = 0; u < 8; ++u) s += p[u];
  for (int64_t j = whole; j < D; ++j) s += term(j);
  return s;
}

// f(std::integral_constant<int, W>{}) with W = D for the row widths the models use most (heads
// of 16-64, models of 64-256), so that GCC unrolls a row into whole vectors (a row of 16 went
// through loop set-up and remainders: l2_norm took 10x a copy's time); W = 0 (D known at run
// time) otherwise. Only the code differs, not the arithmetic or its order.
bool general_widths = false;  // GeneralNormWidths

template <class F>
void with_width(int64_t D, F f) {
  switch (general_widths ? 0 : D) {
    case 16: return f(std::integral_constant<int, 16>{});
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    case 256: return f(std::integral_constant<int, 256>{});
    default: return f(std::integral_constant<int, 0>{});
  }
}

// n <= kNormRows rows of layer_norm from x: their means and 1 / std into stats (two per row),
// and y = (x - mean) rstd w + b (w, b null: 1, 0).
template <int kD>
inline void layer_norm_rows(int64_t Dr, const float* x, int64_t n, const float* w, const float* b, float eps,
                            float* stats, float* y) {
  const int64_t D = kD ? kD : Dr;
  double squares[kNormRows];
  float rstds[kNormRows];
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = x + i * D;
    const double m = row_sum8(D, [xr](int64_t j) { return wide(load8(xr + j)); },
                              [xr](int64_t j) { return double(xr[j]); }) / double(D);
    squares[i] = row_sum8(D, [xr, m](int64_t j) { const Doubles8 c = wide(load8(xr + j)) - m; return c * c; },
                          [xr, m](int64_t j) { return (xr[j] - m) * (xr[j] - m); });
    stats[2 * i] = float(m);
  }
  inverse_stds(n, squares, D, eps, rstds);
  for (int64_t i = 0; i < n; ++i) {
    const float *xr = x + i * D, mean = stats[2 * i], rstd = rstds[i];
    stats[2 * i + 1] = rstd;
#pragma omp simd
    for (int64_t j = 0; j < D; ++j) {
      float yj = (xr[j] - mean) * rstd;
      y[i * D + j] = yj * (w ? w[j] : 1.f) + (b ? b[j] : 0.f);
    }
  }
}

// n <= kNormRows rows of rms_norm from x: their 1 / rms into rstd, and y = x rstd w out_scale
// (w null: 1; each product rounded in turn, so out_scale 1 gives rms_scale_row's bits and any
// other those of mul_scalar on its output).
template <int kD>
inline void rms_norm_rows(int64_t Dr, const float* x, int64_t n, const float* w, float eps, float out_scale,
                          float* rstd, float* y) {
  const int64_t D = kD ? kD : Dr;
  double squares[kNormRows];
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = x + i * D;
    squares[i] = row_sum8(D, [xr](int64_t j) { const Doubles8 v = wide(load8(xr + j)); return v * v; },
                          [xr](int64_t j) { return double(xr[j]) * xr[j]; });
  }
  inverse_stds(n, squares, D, eps, rstd);
  for (int64_t i = 0; i < n; ++i) {
    const float *xr = x + i * D, rs = rstd[i];
    float* yr = y + i * D;
#pragma omp simd
    for (int64_t j = 0; j < D; ++j) yr[j] = xr[j] * rs * (w ? w[j] : 1.f) * out_scale;
  }
}

// One row of layer norm's d x: dx = rstd * (dn - mean(dn) - n * mean(dn * n)), dn = g * w,
// n = (x - mean) * rstd; written as 0 + dx when `fresh`, added otherwise. The two means are
// row_sum's sums (eight double partials, lane u takes j = u mod 8), taken here on vectors of
// eight floats converted to doubles: GCC leaves row_sum's lambda form scalar.
template <int kD = 0>
inline void layer_norm_dx_row(int64_t Dr, const float* gr, const float* xr, const float* w,
                              float mean, float rstd, float* gxr, bool fresh) {
  const int64_t D = kD ? kD : Dr;
  Doubles8 p1{}, p2{};
  int64_t j = 0;
  for (; j + 8 <= D; j += 8) {
    const Floats8 g8 = load8(gr + j), dn = w ? g8 * load8(w + j) : g8, n = (load8(xr + j) - mean) * rstd;
    p1 += __builtin_convertvector(dn, Doubles8);
    p2 += __builtin_convertvector(dn * n, Doubles8);
  }
  double s1 = 0, s2 = 0;
  for (int u = 0; u < 8; ++u) {
    s1 += p1[u];
    s2 += p2[u];
  }
  for (; j < D; ++j) {
    const float dn = gr[j] * (w ? w[j] : 1.f);
    s1 += double(dn);
    s2 += double(dn * ((xr[j] - mean) * rstd));
  }
  const float m1 = float(s1 / double(D)), m2 = float(s2 / double(D));
  for (int64_t k = 0; k < D; ++k) {
    float dn = gr[k] * (w ? w[k] : 1.f), n = (xr[k] - mean) * rstd;
    gxr[k] = (fresh ? 0.f : gxr[k]) + rstd * (dn - m1 - n * m2);
  }
}

// Adds one row's terms of d weight (g * n) and d bias (g) to the column sums sw, sb over
// `width` columns.
inline void layer_norm_column_sums(const float* xr, const float* gr, float mean, float rstd, int64_t width,
                                   float* sw, float* sb) {
#pragma omp simd
  for (int64_t j = 0; j < width; ++j) {
    sw[j] += gr[j] * ((xr[j] - mean) * rstd);
    sb[j] += gr[j];
  }
}

// One row of RMS norm's d x: dx = rstd * (dn - n * mean(dn * n)), n = x * rstd, dn = g * w,
// written as 0 + dx when `fresh`; the mean is row_sum's, on vectors as in layer_norm_dx_row.
// Scaled: g is taken as 0 + g gs, what mul_scalar's backward would have written (l2_norm).
template <bool Scaled = false, int kD = 0>
inline void rms_norm_dx_row(int64_t Dr, const float* gr, const float* xr, const float* w, float rstd,
                            float* gxr, bool fresh, float gs = 1.f) {
  const int64_t D = kD ? kD : Dr;
  auto g_at = [gr, gs](int64_t k) { return Scaled ? 0.f + gr[k] * gs : gr[k]; };
  Doubles8 p{};
  const double rstd_d = rstd;
  int64_t j = 0;
  for (; j + 8 <= D; j += 8) {
    Floats8 g8 = load8(gr + j);
    if constexpr (Scaled) g8 = 0.f + g8 * gs;
    const Floats8 dn = w ? g8 * load8(w + j) : g8;
    p += __builtin_convertvector(dn, Doubles8) * __builtin_convertvector(load8(xr + j), Doubles8) * rstd_d;
  }
  double s = 0;
  for (int u = 0; u < 8; ++u) s += p[u];
  for (; j < D; ++j) s += double(g_at(j) * (w ? w[j] : 1.f)) * xr[j] * rstd;
  const float m = float(s / double(D));
  for (int64_t k = 0; k < D; ++k)
    gxr[k] = (fresh ? 0.f : gxr[k]) + rstd * (g_at(k) * (w ? w[k] : 1.f) - xr[k] * rstd * m);
}

// Adds one row's terms of d weight (g * x * rstd) to the column sums sw over `width` columns.
inline void rms_norm_column_sums(const float* xr, const float* gr, float rstd, int64_t width, float* sw) {
#pragma omp simd
  for (int64_t j = 0; j < width; ++j) sw[j] += gr[j] * xr[j] * rstd;
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  if (x.dim() < 1) throw Error("layer_norm: input must have at least 1 dim");
  check_affine("layer_norm", x, weight, "weight");
  check_affine("layer_norm", x, bias, "bias");
  const int64_t D = x.size(-1), rows = x.numel() / D;
  Tensor out = Tensor::empty(x.shape());
  Tensor stats = Tensor::empty(Shape{rows, 2});  // mean, 1/std: all backward needs besides x
  const float *px = x.data(), *w = weight.defined() ? weight.data() : nullptr,
              *b = bias.defined() ? bias.data() : nullptr;
  float *po = out.data(), *st = stats.data();
  with_width(D, [&](auto width) {
    constexpr int kD = decltype(width)::value;
#pragma omp parallel for schedule(static) if (x.numel() > kParallelMin)
    for (int64_t r0 = 0; r0 < rows; r0 += kNormRows) {
      layer_norm_rows<kD>(D, px + r0 * D, std::min(kNormRows, rows - r0), w, b, eps, st + 2 * r0, po + r0 * D);
    }
  });
  if (!needs_grad({x, weight, bias})) return out;
  // Backward reads x and the weight: both are saved so in-place writes to either are caught.
  record("layer_norm", out, saved_with(x, weight), [x, weight, bias, stats, D, rows](const float* g) {
    const float *px = x.data(), *st = stats.data(), *w = weight.defined() ? weight.data() : nullptr;
    bool fresh;
    float *gx = grad_for_write(x, &fresh), *gw = grad_of(weight), *gb = grad_of(bias);
    with_width(D, [&](auto row_width) {
      constexpr int kD = decltype(row_width)::value;
      auto dx_row = [&](int64_t r) {
        layer_norm_dx_row<kD>(D, g + r * D, px + r * D, w, st[2 * r], st[2 * r + 1], gx + r * D, fresh);
      };
      // Threaded: d x over rows, then the column sums over columns. One thread: one pass, each
      // row of g and x read once for both.
      const bool threaded = x.numel() > kParallelMin && omp_get_max_threads() > 1;
      if (gx && threaded) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) dx_row(r);
      }
      if (!gw && !gb && (threaded || !gx)) return;  // nothing left for the pass below
      column_sums(rows, D, 2, threaded, [&](int64_t r, int64_t j0, int64_t width, float* acc) {
        if (gx && !threaded) dx_row(r);
        if (gw || gb)
          layer_norm_column_sums(px + r * D + j0, g + r * D + j0, st[2 * r], st[2 * r + 1], width, acc, acc + width);
      }, [&](int64_t j0, int64_t width, const float* acc) {
        for (int64_t j = 0; j < width; ++j) {
          if (gw) gw[j0 + j] += acc[j];
          if (gb) gb[j0 + j] += acc[width + j];
        }
      });
    });
  });
  return out;
}

namespace {

// rms_norm, its output times out_scale (rms_norm's rounding, then one product: the bits of
// mul_scalar(rms_norm(x, {}, eps), out_scale) in one pass forward and one backward). A scale
// only without a weight (l2_norm): the weight's column sums read the unscaled gradient.
Tensor scaled_rms_norm(const char* name, const Tensor& x, const Tensor& weight, float eps, float out_scale) {
  if (x.dim() < 1) throw Error(std::string(name) + ": input must have at least 1 dim");
  check_affine(name, x, weight, "weight");
  const int64_t D = x.size(-1), rows = x.numel() / D;
  Tensor out = Tensor::empty(x.shape());
  Tensor rstd_t = Tensor::empty(Shape{rows});
  const float *px = x.data(), *w = weight.defined() ? weight.data() : nullptr;
  float *po = out.data(), *rs = rstd_t.data();
  with_width(D, [&](auto width) {
    constexpr int kD = decltype(width)::value;
#pragma omp parallel for schedule(static) if (x.numel() > kParallelMin)
    for (int64_t r0 = 0; r0 < rows; r0 += kNormRows) {  // in blocks, as layer_norm
      rms_norm_rows<kD>(D, px + r0 * D, std::min(kNormRows, rows - r0), w, eps, out_scale, rs + r0, po + r0 * D);
    }
  });
  if (!needs_grad({x, weight})) return out;
  record(name, out, saved_with(x, weight), [x, weight, rstd_t, D, rows, out_scale](const float* g) {
    const float *px = x.data(), *rs = rstd_t.data(), *w = weight.defined() ? weight.data() : nullptr;
    bool fresh;
    float *gx = grad_for_write(x, &fresh), *gw = grad_of(weight);
    // Scaled, the gradient at rms_norm's output is g * out_scale, taken row by row as
    // mul_scalar's backward would write it (0 + g s: -0 becomes +0).
    with_width(D, [&](auto row_width) {
      constexpr int kD = decltype(row_width)::value;
      auto dx_row = [&](int64_t r) {
        if (out_scale != 1.f)
          rms_norm_dx_row<true, kD>(D, g + r * D, px + r * D, w, rs[r], gx + r * D, fresh, out_scale);
        else
          rms_norm_dx_row<false, kD>(D, g + r * D, px + r * D, w, rs[r], gx + r * D, fresh);
      };
      const bool threaded = x.numel() > kParallelMin && omp_get_max_threads() > 1;  // as in layer_norm
      if (gx && threaded) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) dx_row(r);
      }
      if (!gw && (threaded || !gx)) return;  // as in layer_norm
      column_sums(rows, D, 1, threaded, [&](int64_t r, int64_t j0, int64_t width, float* acc) {
        if (gx && !threaded) dx_row(r);
        if (gw) rms_norm_column_sums(px + r * D + j0, g + r * D + j0, rs[r], width, acc);
      }, [&](int64_t j0, int64_t width, const float* acc) {
        if (!gw) return;
        for (int64_t j = 0; j < width; ++j) gw[j0 + j] += acc[j];
      });
    });
  });
  return out;
}

}  // namespace

GeneralNormWidths::GeneralNormWidths() { general_widths = true; }
GeneralNormWidths::~GeneralNormWidths() { general_widths = false; }

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  return scaled_rms_norm("rms_norm", x, weight, eps, 1.f);
}

// x / sqrt(|x|^2 + eps) = rms_norm(x, eps / D) / sqrt(D), since rms_norm divides by
// sqrt(|x|^2 / D + eps / D).
Tensor l2_norm(const Tensor& x, float eps) {
  if (x.dim() < 1) throw Error("l2_norm: input must have at least 1 dim");
  const int64_t D = x.size(-1);
  return scaled_rms_norm("l2_norm", x, Tensor(), eps / float(D), 1.f / std::sqrt(float(D)));
}

}  // namespace tri
