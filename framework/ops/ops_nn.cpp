// Row-wise neural-network ops over the last axis (D): softmax, log_softmax; plus embedding,
// dropout and the causal depthwise conv1d (and its decoding step). The norms are in
// ops_norms.cpp. Rows are independent, so forward and backward parallelise over rows.
#include <omp.h>

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
