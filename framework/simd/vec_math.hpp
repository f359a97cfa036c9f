// Vectorisable math for the fused kernels: no libm calls, so GCC vectorises the loops that use
// them (-O3 -march=native). Internal to framework/.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace tri {

// e^r for |r| <= ln2/2 (Cephes expf's polynomial) and the reduction x = k ln2 + r, k integral.
inline float exp_reduced(float r) {
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * (r * r) + r + 1.f;
}
inline float exp_octave(float x) { return (x * 1.44269504f + 12582912.f) - 12582912.f; }  // round
inline float exp_remainder(float x, float k) {
  return (x - k * 0.693359375f) + k * 2.12194440e-4f;  // ln2 in two parts
}
inline float pow2i(int32_t k) { return std::bit_cast<float>((k + 127) << 23); }  // normal range

// exp(x) to about 1 ulp (Cephes expf): 2^k p(r) with r = x - k ln2 in [-ln2/2, ln2/2].
// x is clamped to [-87.3, 88.3]: below, the result is 1.2e-38 instead of 0 (or a denormal);
// above, 2e38 instead of overflowing.
inline float exp_approx(float x) {
  const float xc = std::min(std::max(x, -87.3f), 88.3f);
  const float k = exp_octave(xc);
  return exp_reduced(exp_remainder(xc, k)) * pow2i(int32_t(k));
}

// exp(x) over the whole float range, like libm's expf: denormals below -87.3, 0 from -103.9,
// +inf above 88.72. 2^k is applied as 2^(k/2) 2^(k - k/2), each factor a normal float.
inline float exp_full(float x) {
  const float xc = std::min(std::max(x, -104.f), 89.f);
  const float k = exp_octave(xc);
  const int32_t ki = int32_t(k), half = ki / 2;
  return exp_reduced(exp_remainder(xc, k)) * pow2i(half) * pow2i(ki - half);
}

// log(1 + w) for w in [0, 1] (Cephes logf polynomial on 1 + f, f in [sqrt(1/2) - 1, sqrt(2) - 1],
// f taken from w without forming 1 + w, so small w keeps its relative precision).
inline float log1p_unit(float w) {
  const bool hi = w > 0.41421356f;
  const float f = hi ? (w - 1.f) * 0.5f : w;  // hi: 1 + w = 2 (1 + f)
  const float z = f * f;
  float p = 7.0376836292e-2f;
  p = p * f - 1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f - 1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f - 1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f - 2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  float y = p * f * z - 0.5f * z;
  if (hi) y -= 2.12194440e-4f;
  return f + y + (hi ? 0.693359375f : 0.f);
}

// expm1(x) to 1.2 ulp (measured over every float in [-88, 0.6] against double expm1): a
// degree-7 polynomial x + x^2 q(x) (least-squares minimax fit) for |x| < 1/2, where exp(x) - 1
// would cancel, and exp_approx(x) - 1 beyond.
inline float expm1_approx(float x) {
  float q = 1.98498077e-4f;
  q = q * x + 1.39961776e-3f;
  q = q * x + 8.33357871e-3f;
  q = q * x + 4.16653603e-2f;
  q = q * x + 1.66666642e-1f;
  q = q * x + 5.00000060e-1f;
  const float small = std::fma(x * x, q, x);
  return std::fabs(x) < 0.5f ? small : exp_approx(x) - 1.f;
}

// erf(x) to 1.2 ulp (measured over every float in [1e-6, 5] against double erf; glibc's erff
// is 1.0): for |x| < 0.921875, x + x p(x^2) (degree 5 in x^2); above, 1 - exp(r(|x|)) with r a
// degree-8 fit of log(erfc) up to 3.925, where erf rounds to 1. Both are least-squares
// minimax fits, evaluated without a branch so loops over it vectorise. NaN stays NaN.
inline float erf_approx(float x) {
  const float a = std::fabs(x), x2 = x * x;
  float p = -6.01352891e-4f;
  p = p * x2 + 4.99803247e-3f;
  p = p * x2 - 2.67702583e-2f;
  p = p * x2 + 1.12819284e-1f;
  p = p * x2 - 3.76125067e-1f;
  p = p * x2 + 1.28379151e-1f;
  const float small = std::fma(x, p, x);
  const float t = std::min(a, 3.925f);
  float r = -4.37767028e-7f;
  r = r * t - 1.54751979e-5f;
  r = r * t + 4.03590646e-4f;
  r = r * t - 4.07623546e-3f;
  r = r * t + 2.49411929e-2f;
  r = r * t - 1.08070046e-1f;
  r = r * t - 6.33498609e-1f;
  r = r * t - 1.12945354f;
  r = r * t + 1.64003504e-4f;
  const float large = std::copysign(a >= 3.925f ? 1.f : 1.f - exp_approx(r), x);
  return a < 0.921875f || a != a ? small : large;
}

// tanh(x) = e / (e + 2) with e = expm1(2|x|), sign restored; 1 from |x| = 9 on, where tanh
// rounds to 1.
inline float tanh_approx(float x) {
  const float a = std::min(std::fabs(x), 9.f), e = expm1_approx(2.f * a);
  return std::copysign(e / (e + 2.f), x);
}

inline float sigmoid_approx(float x) { return 1.f / (1.f + exp_approx(-x)); }

// PyTorch's softplus (threshold 20): x above it, else log(1 + e^x) = max(x, 0) + log1p(e^-|x|).
inline float softplus_approx(float x) {
  const float sp = std::max(x, 0.f) + log1p_unit(exp_approx(-std::fabs(x)));
  return x > 20.f ? x : sp;
}

// 2^x for the softmax's arguments (x <= 0, scores kept in base 2), in a form GCC vectorises:
// 2^x = 2^n 2^f, n = round(x) (by the 1.5 * 2^23 trick, which leaves n in the low mantissa
// bits), f in [-1/2, 1/2], 2^f by a degree-5 minimax polynomial (relative error 2.2e-7).
// Below -126.5 the result is exactly 0, and so it is for the masked scores, -inf.
inline float exp2_neg(float x) {
  x = x < -127.f ? -127.f : x;
  const float shifted = x + 0x1.8p23f;
  const float n = shifted - 0x1.8p23f, f = x - n;
  const int32_t ni = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(0x1.8p23f);
  float p = 1.3276472e-3f;
  p = p * f + 9.6755410e-3f;
  p = p * f + 5.5507131e-2f;
  p = p * f + 2.4022120e-1f;
  p = p * f + 6.9314694e-1f;
  p = p * f + 1.0000001f;
  return p * std::bit_cast<float>((ni + 127) << 23);  // n = -127: 2^n is 0
}

// GELU, exact (erf) form: x Phi(x), and its derivative Phi(x) + x phi(x). One definition for the
// unary op and for gelu_linear, which recomputes it in backward.
inline float gelu_value(float x) { return 0.5f * x * (1.f + erf_approx(x * 0.70710678118654752f)); }
inline float gelu_derivative(float x) {
  return 0.5f * (1.f + erf_approx(x * 0.70710678118654752f)) +
         x * 0.39894228040143268f * exp_approx(-0.5f * x * x);
}
// Both from one erf, with the bits of the two above.
inline void gelu_value_and_derivative(float x, float& value, float& derivative) {
  const float e = erf_approx(x * 0.70710678118654752f);
  value = 0.5f * x * (1.f + e);
  derivative = 0.5f * (1.f + e) + x * 0.39894228040143268f * exp_approx(-0.5f * x * x);
}

}  // namespace tri
