// Vectorisable math for the fused kernels: no libm calls, so GCC vectorises the loops that use
// them (-O3 -march=native). Internal to framework/.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace tri {

// exp(x) to about 1 ulp (Cephes expf): 2^k p(r) with r = x - k ln2 in [-ln2/2, ln2/2].
// x is clamped to [-87.3, 88.3]: below, the result is 1.2e-38 instead of 0 (or a denormal);
// above, 2e38 instead of overflowing.
inline float exp_approx(float x) {
  const float xc = std::min(std::max(x, -87.3f), 88.3f);
  const float k = (xc * 1.44269504f + 12582912.f) - 12582912.f;  // round to nearest integer
  const float r = (xc - k * 0.693359375f) + k * 2.12194440e-4f;  // ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.f;
  const float scale = std::bit_cast<float>((int32_t(k) + 127) << 23);
  return p * scale;
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

}  // namespace tri
