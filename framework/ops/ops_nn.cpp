// Row-wise neural-network ops over the last axis (D): layer_norm, rms_norm, softmax,
// log_softmax; plus embedding, dropout and the causal depthwise conv1d (and its decoding step).
// Rows are independent, so forward and backward parallelise over rows.
#include <omp.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/runtime/runtime.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/rows.hpp"
#include "framework/core/rng.hpp"

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

using rows::row_sum;

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

// One row of layer norm's d x: dx = rstd * (dn - mean(dn) - n * mean(dn * n)), dn = g * w,
// n = (x - mean) * rstd; written as 0 + dx when `fresh`, added otherwise. The two means are
// row_sum's sums (eight double partials, lane u takes j = u mod 8), taken here on vectors of
// eight floats converted to doubles: GCC leaves row_sum's lambda form scalar.
inline void layer_norm_dx_row(int64_t D, const float* gr, const float* xr, const float* w,
                              float mean, float rstd, float* gxr, bool fresh) {
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
template <bool Scaled = false>
inline void rms_norm_dx_row(int64_t D, const float* gr, const float* xr, const float* w, float rstd,
                            float* gxr, bool fresh, float gs = 1.f) {
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
#pragma omp parallel for schedule(static) if (x.numel() > kParallelMin)
  for (int64_t r0 = 0; r0 < rows; r0 += kNormRows) {
    const int64_t n = std::min(kNormRows, rows - r0);
    double squares[kNormRows];
    float rstds[kNormRows];
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = px + (r0 + i) * D;
      const double m = row_sum(D, [xr](int64_t j) { return double(xr[j]); }) / double(D);
      squares[i] = row_sum(D, [xr, m](int64_t j) { return (xr[j] - m) * (xr[j] - m); });
      st[2 * (r0 + i)] = float(m);
    }
    inverse_stds(n, squares, D, eps, rstds);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = r0 + i;
      const float *xr = px + r * D, mean = st[2 * r], rstd = rstds[i];
      st[2 * r + 1] = rstd;
      for (int64_t j = 0; j < D; ++j) {
        float y = (xr[j] - mean) * rstd;
        po[r * D + j] = y * (w ? w[j] : 1.f) + (b ? b[j] : 0.f);
      }
    }
  }
  if (!needs_grad({x, weight, bias})) return out;
  // Backward reads x and the weight: both are saved so in-place writes to either are caught.
  record("layer_norm", out, saved_with(x, weight), [x, weight, bias, stats, D, rows](const float* g) {
    const float *px = x.data(), *st = stats.data(), *w = weight.defined() ? weight.data() : nullptr;
    bool fresh;
    float *gx = grad_for_write(x, &fresh), *gw = grad_of(weight), *gb = grad_of(bias);
    auto dx_row = [&](int64_t r) {
      layer_norm_dx_row(D, g + r * D, px + r * D, w, st[2 * r], st[2 * r + 1], gx + r * D, fresh);
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
#pragma omp parallel for schedule(static) if (x.numel() > kParallelMin)
  for (int64_t r0 = 0; r0 < rows; r0 += kNormRows) {  // in blocks, as layer_norm
    const int64_t n = std::min(kNormRows, rows - r0);
    double squares[kNormRows];
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = px + (r0 + i) * D;
      squares[i] = row_sum(D, [xr](int64_t j) { return double(xr[j]) * xr[j]; });
    }
    inverse_stds(n, squares, D, eps, rs + r0);
    for (int64_t r = r0; r < r0 + n; ++r) {
      float* y = po + r * D;
      tri::rows::rms_scale_row(px + r * D, D, rs[r], w, y);
      if (out_scale != 1.f)
        for (int64_t j = 0; j < D; ++j) y[j] *= out_scale;
    }
  }
  if (!needs_grad({x, weight})) return out;
  record(name, out, saved_with(x, weight), [x, weight, rstd_t, D, rows, out_scale](const float* g) {
    const float *px = x.data(), *rs = rstd_t.data(), *w = weight.defined() ? weight.data() : nullptr;
    bool fresh;
    float *gx = grad_for_write(x, &fresh), *gw = grad_of(weight);
    // Scaled, the gradient at rms_norm's output is g * out_scale, taken row by row as
    // mul_scalar's backward would write it (0 + g s: -0 becomes +0).
    auto dx_row = [&](int64_t r) {
      if (out_scale != 1.f)
        rms_norm_dx_row<true>(D, g + r * D, px + r * D, w, rs[r], gx + r * D, fresh, out_scale);
      else
        rms_norm_dx_row(D, g + r * D, px + r * D, w, rs[r], gx + r * D, fresh);
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
  return out;
}

}  // namespace

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

Tensor softmax(const Tensor& x) {
  if (x.dim() < 1) throw Error("softmax: input must have at least 1 dim");
  const int64_t D = x.size(-1), rows = x.numel() / D;
  Tensor out = Tensor::empty(x.shape());
  const float* px = x.data();
  float* po = out.data();
#pragma omp parallel for schedule(static) if (x.numel() > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * D;
    float* yr = po + r * D;
    float mx = -INFINITY;
    for (int64_t j = 0; j < D; ++j) mx = std::max(mx, xr[j]);
    double s = 0;
    for (int64_t j = 0; j < D; ++j) s += (yr[j] = std::exp(xr[j] - mx));
    const float inv = float(1.0 / s);
    for (int64_t j = 0; j < D; ++j) yr[j] *= inv;
  }
  if (!needs_grad({x})) return out;
  record("softmax", out, {out}, [x, out, D, rows](const float* g) {
    const float* py = out.data();
    float* gx = grad_of(x);
#pragma omp parallel for schedule(static) if (x.numel() > kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {  // dx = y * (g - sum(g * y))
      const float *yr = py + r * D, *gr = g + r * D;
      double dot = 0;
      for (int64_t j = 0; j < D; ++j) dot += double(gr[j]) * yr[j];
      for (int64_t j = 0; j < D; ++j) gx[r * D + j] += yr[j] * (gr[j] - float(dot));
    }
  });
  return out;
}

Tensor log_softmax(const Tensor& x) {
  if (x.dim() < 1) throw Error("log_softmax: input must have at least 1 dim");
  const int64_t D = x.size(-1), rows = x.numel() / D;
  Tensor out = Tensor::empty(x.shape());
  const float* px = x.data();
  float* po = out.data();
#pragma omp parallel for schedule(static) if (x.numel() > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * D;
    float mx = -INFINITY;
    for (int64_t j = 0; j < D; ++j) mx = std::max(mx, xr[j]);
    double s = 0;
    for (int64_t j = 0; j < D; ++j) s += std::exp(double(xr[j] - mx));
    const float lse = mx + float(std::log(s));
    for (int64_t j = 0; j < D; ++j) po[r * D + j] = xr[j] - lse;
  }
  if (!needs_grad({x})) return out;
  record("log_softmax", out, {out}, [x, out, D, rows](const float* g) {
    const float* py = out.data();
    float* gx = grad_of(x);
#pragma omp parallel for schedule(static) if (x.numel() > kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {  // dx = g - softmax * sum(g)
      const float *yr = py + r * D, *gr = g + r * D;
      double s = 0;
      for (int64_t j = 0; j < D; ++j) s += gr[j];
      for (int64_t j = 0; j < D; ++j) gx[r * D + j] += gr[j] - std::exp(yr[j]) * float(s);
    }
  });
  return out;
}

Tensor embedding(const Tensor& weight, const IntTensor& ids) {
  if (weight.dim() != 2) throw Error("embedding: weight must be [V, D], got " + weight.shape().str());
  const int64_t V = weight.size(0), D = weight.size(1), n = ids.numel();
  for (int64_t i = 0; i < n; ++i)
    if (ids.data()[i] < 0 || ids.data()[i] >= V)
      throw Error("embedding: token id " + std::to_string(ids.data()[i]) + " out of range [0, " +
                  std::to_string(V) + ")");
  std::vector<int64_t> os = ids.shape().vec();
  os.push_back(D);
  Tensor out = Tensor::empty(Shape(os));
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out.data() + i * D, weight.data() + int64_t(ids.data()[i]) * D, sizeof(float) * size_t(D));
  if (!needs_grad({weight})) return out;
  record("embedding", out, {}, [weight, ids, D, n](const float* g) {
    float* gw = grad_of(weight);
    for (int64_t i = 0; i < n; ++i) {  // scatter-add: repeated ids accumulate
      float* row = gw + int64_t(ids.data()[i]) * D;
      for (int64_t j = 0; j < D; ++j) row[j] += g[i * D + j];
    }
  });
  return out;
}

Tensor dropout(const Tensor& x, float p, bool training, uint64_t seed, uint64_t counter) {
  if (!(p >= 0.f && p < 1.f))
    throw Error("dropout: probability " + std::to_string(p) + " out of range (allowed: 0 <= p < 1)");
  if (!training || p == 0.f) return x;
  const int64_t n = x.numel();
  const float scale = 1.f / (1.f - p);
  // The mask is a pure function of (seed, counter, i): reproducible and thread-count independent.
  Tensor mask = Tensor::empty(x.shape());
  float* pm = mask.data();
  const uint64_t stream = seed_mix(seed, counter);
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) pm[i] = uniform_at(stream, uint64_t(i)) < p ? 0.f : scale;
  Tensor out = Tensor::empty(x.shape());
  const float* px = x.data();
  float* po = out.data();
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) po[i] = px[i] * pm[i];
  if (!needs_grad({x})) return out;
  record("dropout", out, {}, [x, mask, n](const float* g) {
    const float* pm = mask.data();
    float* gx = grad_of(x);
    for (int64_t i = 0; i < n; ++i) gx[i] += g[i] * pm[i];
  });
  return out;
}

Tensor causal_conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (x.dim() != 3) throw Error("causal_conv1d: input must be [B, T, C], got " + x.shape().str());
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  if (weight.dim() != 3 || weight.size(0) != C || weight.size(1) != 1)
    throw Error("causal_conv1d: weight " + weight.shape().str() + " does not match input " +
                x.shape().str() + " (expected [" + std::to_string(C) + ", 1, K])");
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != C))
    throw Error("causal_conv1d: bias " + bias.shape().str() + " must be [" + std::to_string(C) + "]");
  const int64_t K = weight.size(2);
  Tensor out = Tensor::empty(x.shape());
  const float *px = x.data(), *w = weight.data(), *b = bias.defined() ? bias.data() : nullptr;
  float* po = out.data();
#pragma omp parallel for collapse(2) schedule(static) if (x.numel() > kParallelMin)
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t t = 0; t < T; ++t) {
      float* yr = po + (bi * T + t) * C;
      for (int64_t c = 0; c < C; ++c) yr[c] = b ? b[c] : 0.f;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t ts = t - K + 1 + k;
        if (ts < 0) continue;
        const float* xr = px + (bi * T + ts) * C;
        for (int64_t c = 0; c < C; ++c) yr[c] += w[c * K + k] * xr[c];
      }
    }
  if (!needs_grad({x, weight, bias})) return out;
  record("causal_conv1d", out, {x, weight}, [x, weight, bias, B, T, C, K](const float* g) {
    const float *px = x.data(), *w = weight.data();
    float *gx = grad_of(x), *gw = grad_of(weight), *gb = grad_of(bias);
    if (gx) {
#pragma omp parallel for collapse(2) schedule(static) if (x.numel() > kParallelMin)
      for (int64_t bi = 0; bi < B; ++bi)
        for (int64_t ts = 0; ts < T; ++ts) {  // x[ts] feeds y[ts + K-1-k] through w[k]
          float* gxr = gx + (bi * T + ts) * C;
          for (int64_t k = 0; k < K; ++k) {
            const int64_t t = ts + K - 1 - k;
            if (t >= T) continue;
            const float* gr = g + (bi * T + t) * C;
            for (int64_t c = 0; c < C; ++c) gxr[c] += w[c * K + k] * gr[c];
          }
        }
    }
    for (int64_t bi = 0; bi < B && (gw || gb); ++bi)
      for (int64_t t = 0; t < T; ++t) {
        const float* gr = g + (bi * T + t) * C;
        if (gb)
          for (int64_t c = 0; c < C; ++c) gb[c] += gr[c];
        if (gw)
          for (int64_t k = 0; k < K; ++k) {
            const int64_t ts = t - K + 1 + k;
            if (ts < 0) continue;
            const float* xr = px + (bi * T + ts) * C;
            for (int64_t c = 0; c < C; ++c) gw[c * K + k] += gr[c] * xr[c];
          }
      }
  });
  return out;
}

Tensor causal_conv1d_step(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& window) {
  if (x.dim() != 3 || weight.dim() != 3 || window.dim() != 3 || x.size(1) != 1 || weight.size(0) != x.size(2) ||
      window.size(0) != x.size(0) || window.size(1) != weight.size(2) - 1 || window.size(2) != x.size(2))
    throw Error("causal_conv1d_step: input " + x.shape().str() + ", weight " + weight.shape().str() +
                " and window " + window.shape().str() + " must be [B, 1, C], [C, 1, K] and [B, K-1, C]");
  const int64_t B = x.size(0), C = x.size(2), K = weight.size(2);
  Tensor out = Tensor::empty(x.shape());
  const float *w = weight.data(), *cb = bias.defined() ? bias.data() : nullptr;
  for (int64_t bi = 0; bi < B; ++bi)
    rows::conv_step_row(x.data() + bi * C, C, w, cb, K, window.data() + bi * (K - 1) * C, out.data() + bi * C);
  window.bump_version();
  return out;
}

}  // namespace tri
