// Position information for attention: ALiBi slopes, rotary embeddings (RoPE) and the
// sinusoidal table. Angles and slopes are computed in double and rounded once to float.
#include <cmath>
#include <string>

#include "framework/ops/positions.hpp"
#include "framework/core/autograd.hpp"

namespace tri {

// The official implementation (ofirpress/attention_with_linear_biases): for n a power of two,
// slope_i = 2^(-8 i / n), i = 1..n; otherwise the slopes of the largest power of two n < H,
// followed by every other slope of the 2n sequence (2^(-4 i / n) for odd i) up to H in all.
std::vector<float> alibi_slopes(int64_t heads) {
  if (heads < 1) throw Error("alibi_slopes: heads " + std::to_string(heads) + " must be >= 1");
  int64_t n = 1;
  while (n * 2 <= heads) n *= 2;
  std::vector<float> slopes;
  for (int64_t i = 1; i <= n; ++i) slopes.push_back(float(std::exp2(-8.0 * double(i) / double(n))));
  for (int64_t i = 1; int64_t(slopes.size()) < heads; i += 2)
    slopes.push_back(float(std::exp2(-8.0 * double(i) / double(2 * n))));
  return slopes;
}

namespace {
// cos and sin of the rotation angles [T][Dh / 2]: (offset + t) * base^(-2j / Dh).
void rope_table(int64_t T, int64_t Dh, int64_t offset, float base, std::vector<float>& cos_t,
                std::vector<float>& sin_t) {
  const int64_t half = Dh / 2;
  cos_t.resize(size_t(T * half));
  sin_t.resize(size_t(T * half));
  for (int64_t j = 0; j < half; ++j) {
    const double inv_freq = std::pow(double(base), -2.0 * double(j) / double(Dh));
    for (int64_t t = 0; t < T; ++t) {
      const double angle = double(offset + t) * inv_freq;
      cos_t[size_t(t * half + j)] = float(std::cos(angle));
      sin_t[size_t(t * half + j)] = float(std::sin(angle));
    }
  }
}

// Rotates every head vector of x [B, T, H, Dh] by the table's angles, or by their negatives
// (the inverse rotation, which is also the transpose: backward's rule).
void rotate(const float* x, float* y, int64_t B, int64_t T, int64_t H, int64_t Dh,
            const std::vector<float>& cos_t, const std::vector<float>& sin_t, bool inverse,
            bool accumulate) {
  const int64_t half = Dh / 2;
  const float sign = inverse ? -1.f : 1.f;
#pragma omp parallel for schedule(static) if (B * T * H * Dh > (1 << 16))
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const float *c = cos_t.data() + (bt % T) * half, *s = sin_t.data() + (bt % T) * half;
    for (int64_t h = 0; h < H; ++h) {
      const float* xr = x + (bt * H + h) * Dh;
      float* yr = y + (bt * H + h) * Dh;
      for (int64_t j = 0; j < half; ++j) {  // (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)
        const float x1 = xr[j], x2 = xr[j + half], sn = sign * s[j];
        const float y1 = x1 * c[j] - x2 * sn, y2 = x2 * c[j] + x1 * sn;
        yr[j] = accumulate ? yr[j] + y1 : y1;
        yr[j + half] = accumulate ? yr[j + half] + y2 : y2;
      }
    }
  }
}
}  // namespace

Tensor rope(const Tensor& x, int64_t offset, float base) {
  if (x.dim() != 4 || x.size(3) % 2 != 0)
    throw Error("rope: x " + x.shape().str() + " must be [B, T, H, Dh] with Dh even");
  if (!(base > 0.f)) throw Error("rope: base " + std::to_string(base) + " must be > 0");
  if (offset < 0) throw Error("rope: offset " + std::to_string(offset) + " must be >= 0");
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), Dh = x.size(3);
  std::vector<float> cos_t, sin_t;
  rope_table(T, Dh, offset, base, cos_t, sin_t);
  Tensor out = Tensor::empty(x.shape());
  rotate(x.data(), out.data(), B, T, H, Dh, cos_t, sin_t, false, false);
  if (!needs_grad({x})) return out;
  record("rope", out, {}, [x, B, T, H, Dh, cos_t, sin_t](const float* g) {
    rotate(g, grad_of(x), B, T, H, Dh, cos_t, sin_t, true, true);
  });
  return out;
}

Tensor sinusoidal_positions(int64_t T, int64_t D, int64_t offset) {
  if (T < 0 || D < 1 || offset < 0)
    throw Error("sinusoidal_positions: T " + std::to_string(T) + ", D " + std::to_string(D) +
                ", offset " + std::to_string(offset) + ": need T >= 0, D >= 1, offset >= 0");
  Tensor pe = Tensor::empty(Shape{T, D});
  float* p = pe.data();
  for (int64_t c = 0; c < D; ++c) {
    const double freq = std::pow(10000.0, -double(c / 2 * 2) / double(D));  // 2i: c made even
    for (int64_t t = 0; t < T; ++t) {
      const double angle = double(offset + t) * freq;
      p[t * D + c] = float(c % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  }
  return pe;
}

}  // namespace tri
