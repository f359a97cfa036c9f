// The arithmetic of one row of rms_norm and of causal_conv1d_step, shared by those ops and by
// the mixers' fused decoding steps (models/deltanet.cpp, models/mamba2.cpp), which must give the
// bits of the ops they replace: one definition, so the two cannot drift apart.
#pragma once
#include <cmath>
#include <cstdint>

namespace tri::rows {

// sum_j f(j) over a row of D values, in double: eight partial sums (lane u takes j = u mod 8,
// one vector of doubles) added in order, then the tail. A fixed order, so the same bits at any
// thread count; unlike one serial double chain, the loop vectorises (layer_norm was 7% of a
// training step at S).
template <class F>
double row_sum(int64_t D, F f) {
  double part[8] = {};
  int64_t j = 0;
  for (; j + 8 <= D; j += 8)
    for (int u = 0; u < 8; ++u) part[u] += f(j + u);
  double s = 0;
  for (int u = 0; u < 8; ++u) s += part[u];
  for (; j < D; ++j) s += f(j);
  return s;
}

// 1 / sqrt(|x|^2 / D + eps) of a row as rms_norm takes it (correctly rounded in double, so its
// vectorised path over several rows has these bits too).
inline float rms_rstd(const float* x, int64_t D, float eps) {
  const double s = row_sum(D, [x](int64_t j) { return double(x[j]) * x[j]; });
  return float(1.0 / std::sqrt(s / double(D) + eps));
}

// A row scaled by its rstd and the weight: y = x * rstd * w (w null: 1). y may be x.
inline void rms_scale_row(const float* x, int64_t D, float rstd, const float* w, float* y) {
  for (int64_t j = 0; j < D; ++j) y[j] = x[j] * rstd * (w ? w[j] : 1.f);
}

// rms_norm of one row. y may be x.
inline void rms_norm_row(const float* x, int64_t D, float eps, const float* w, float* y) {
  rms_scale_row(x, D, rms_rstd(x, D, eps), w, y);
}

// One token of causal_conv1d over C channels: y = bias + the taps oldest to newest (its order of
// additions), weight [C, 1, K], past [K-1, C] oldest first; then slides x into past.
inline void conv_step_row(const float* x, int64_t C, const float* w, const float* bias, int64_t K, float* past,
                          float* y) {
  for (int64_t c = 0; c < C; ++c) y[c] = bias ? bias[c] : 0.f;
  for (int64_t k = 0; k < K - 1; ++k)
    for (int64_t c = 0; c < C; ++c) y[c] += w[c * K + k] * past[k * C + c];
  for (int64_t c = 0; c < C; ++c) y[c] += w[c * K + K - 1] * x[c];
  for (int64_t k = 0; k + 1 < K - 1; ++k)  // slide the window by one
    for (int64_t c = 0; c < C; ++c) past[k * C + c] = past[(k + 1) * C + c];
  if (K > 1)
    for (int64_t c = 0; c < C; ++c) past[(K - 2) * C + c] = x[c];
}

}  // namespace tri::rows
