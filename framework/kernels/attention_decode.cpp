// Softmax attention for a few queries against a long KV cache (decoding), no gradient.
// The fused kernel (attention.cpp) packs every head's K^T and V into padded tiles first, which
// pays off when many queries share them; one query per step would copy the whole cache each
// token. Here each query reads its keys and values once, in place, whole rows in order:
//   pass 1: s_j = log2(e) (scale q.k_j + slope (j - pos)) for the visible keys, and their max;
//   pass 2: p_j = 2^(s_j - max), l = sum p_j, out = sum p_j v_j / l.
// Written first as plain loops (the reference, attention_decode_plain); with AVX-512 and heads of
// a multiple of 16 floats, pass 1 takes 16 keys at a time and the weighted sum keeps its outputs
// in registers, both with the plain loops' operations in their order (the same bits).
// A ring buffer (a windowed cache overwriting its oldest row) is read from its oldest row on,
// wrapping at the end: the same order of positions, the same sums as rows kept in order.
// Each output element is computed by one thread in a fixed order: the same bits at any thread
// count.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "framework/kernels/attention.hpp"
#include "framework/simd/tile_kernels.hpp"
#include "framework/simd/vec_math.hpp"
#include "framework/core/autograd.hpp"

namespace tri {

namespace {

constexpr float kLog2e = 1.44269504088896341f;

// The rows of n consecutive key positions in a cache of `rows` rows: from row `first` on,
// wrapping to row 0 after the last.
struct RingRows {
  int64_t first, rows;
  int64_t operator[](int64_t j) const { return first + j < rows ? first + j : first + j - rows; }
};

// The score pass as a plain loop: s_j = scale2 (q . k_j) + slope2 (j - pos), max m. `dot` is
// `omp simd reduction`, which GCC builds as one partial per vector lane (fused multiply-adds
// over the lane's columns in order, from 0) and then the 16 partials added in lane order onto
// the initial 0. Keys [j0, j1) of heads [0, heads).
void scores_plain(const float* q, const float* k, RingRows ring, int64_t j0, int64_t j1, int64_t n,
                  int64_t stride, int64_t heads, int64_t Dh, float scale2, const float* slope2,
                  float dist0, float* s, float* m) {
  for (int64_t j = j0; j < j1; ++j) {
    const float* kj = k + ring[j] * stride;
    for (int64_t h = 0; h < heads; ++h) {
      float dot = 0.f;
#pragma omp simd reduction(+ : dot)
      for (int64_t d = 0; d < Dh; ++d) dot += q[h * Dh + d] * kj[h * Dh + d];
      const float x = dot * scale2 + slope2[h] * (dist0 + float(j));
      s[h * n + j] = x;
      m[h] = std::max(m[h], x);
    }
  }
}

#ifdef __AVX512F__
// GCC 12 warns about the undefined pass-through inside its own max and extract intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The same scores for 16 keys at a time when Dh is a multiple of 16 (the loop above has no
// remainder then): each key's 16 lane partials, transposed so that the keys are the lanes, and
// added partial by partial in lane order onto 0. The same operations in the same order, so the
// same bits; a key's dot no longer waits on a chain of 16 scalar adds.
void scores_by16(const float* q, const float* k, RingRows ring, int64_t n, int64_t stride, int64_t heads,
                 int64_t Dh, float scale2, const float* slope2, float dist0, float* s, float* m) {
  alignas(64) float part[16][16], cols[16][16];
  const __m512 scale = _mm512_set1_ps(scale2);
  for (int64_t h = 0; h < heads; ++h) {
    const __m512 slope = _mm512_set1_ps(slope2[h]);
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j + 16 <= n; j += 16) {
      for (int r = 0; r < 16; ++r) {
        const float *kr = k + ring[j + r] * stride + h * Dh, *qh = q + h * Dh;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t d = 0; d < Dh; d += 16)
          acc = _mm512_fmadd_ps(_mm512_loadu_ps(qh + d), _mm512_loadu_ps(kr + d), acc);
        _mm512_store_ps(part[r], acc);
      }
      tile_kernels::transpose16(&part[0][0], 16, &cols[0][0], 16);
      __m512 dot = _mm512_setzero_ps();
      for (int l = 0; l < 16; ++l) dot = _mm512_add_ps(dot, _mm512_load_ps(cols[l]));
      alignas(64) float dist[16];
      for (int r = 0; r < 16; ++r) dist[r] = dist0 + float(j + r);
      const __m512 x = _mm512_fmadd_ps(dot, scale, _mm512_mul_ps(slope, _mm512_load_ps(dist)));
      _mm512_storeu_ps(s + h * n + j, x);
      mx = _mm512_max_ps(mx, x);
    }
    m[h] = std::max(m[h], _mm512_reduce_max_ps(mx));
  }
  const int64_t done = n / 16 * 16;  // the last keys, fewer than 16, as the plain loop
  scores_plain(q, k, ring, done, n, n, stride, heads, Dh, scale2, slope2, dist0, s, m);
}

// out[c] += sum_j p_j(c) v_j[c] for NV vectors of 16 outputs from column c0 (heads of Dh, a
// multiple of 16), one fused multiply-add chain per output over the keys in order (the plain
// loop's), the NV partial outputs in registers through all n keys.
template <int NV>
void weighted_sum(const float* v, RingRows ring, int64_t n, int64_t stride, int64_t Dh, const float* s,
                  int64_t c0, float* out) {
  __m512 acc[NV];
  const float* p[NV];  // each vector's head's probabilities
  for (int u = 0; u < NV; ++u) {
    acc[u] = _mm512_loadu_ps(out + c0 + 16 * u);
    p[u] = s + (c0 + 16 * u) / Dh * n;
  }
  for (int64_t j = 0; j < n; ++j) {
    const float* vj = v + ring[j] * stride + c0;
    for (int u = 0; u < NV; ++u)
      acc[u] = _mm512_fmadd_ps(_mm512_set1_ps(p[u][j]), _mm512_loadu_ps(vj + 16 * u), acc[u]);
  }
  for (int u = 0; u < NV; ++u) _mm512_storeu_ps(out + c0 + 16 * u, acc[u]);
}
#pragma GCC diagnostic pop
#endif

// Query (b, i) at position pos against heads [h0, h1), the n keys/values at positions
// lo .. lo + n - 1, in rows `ring`: rows of the cache are read whole and in order (all of the
// task's heads per row), so the reads stream through memory once. q, k, v and out point at head
// h0 of their rows; rows are `stride` floats apart; s is scratch of (h1 - h0) n floats.
// `plain`: the plain loops only.
void attend_heads(const float* q, const float* k, const float* v, RingRows ring, int64_t lo, int64_t n,
                  int64_t stride, int64_t heads, int64_t Dh, float scale2, const float* slope2, int64_t pos,
                  float* s, float* out, bool plain) {
  std::vector<float> m(size_t(heads), -INFINITY), l(size_t(heads), 0.f);
  const float dist0 = float(lo - pos);  // key j's distance: lo + j - pos, exact in float
  bool by16 = false;
#ifdef __AVX512F__
  by16 = !plain && Dh % 16 == 0;
  if (by16) scores_by16(q, k, ring, n, stride, heads, Dh, scale2, slope2, dist0, s, m.data());
#endif
  if (!by16) scores_plain(q, k, ring, 0, n, n, stride, heads, Dh, scale2, slope2, dist0, s, m.data());
  for (int64_t h = 0; h < heads; ++h) {
    float* sh = s + h * n;
    const float mh = m[size_t(h)];
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      sh[j] = exp2_neg(sh[j] - mh);
      sum += sh[j];
    }
    l[size_t(h)] = sum;
  }
  std::fill(out, out + heads * Dh, 0.f);
#ifdef __AVX512F__
  if (by16) {
    int64_t c = 0;  // eight vectors of outputs per walk through the values, then what is left
    for (; c + 128 <= heads * Dh; c += 128) weighted_sum<8>(v, ring, n, stride, Dh, s, c, out);
    for (; c < heads * Dh; c += 16) weighted_sum<1>(v, ring, n, stride, Dh, s, c, out);
  }
#endif
  if (!by16)
    for (int64_t j = 0; j < n; ++j) {
      const float* vj = v + ring[j] * stride;
      for (int64_t h = 0; h < heads; ++h) {
        const float p = s[h * n + j];
#pragma omp simd
        for (int64_t d = 0; d < Dh; ++d) out[h * Dh + d] += p * vj[h * Dh + d];
      }
    }
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t d = 0; d < Dh; ++d) out[h * Dh + d] /= l[size_t(h)];
}

Tensor decode(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt,
              int64_t first_row, bool plain) {
  if (first_row != 0) {
    if (first_row < 0 || k.dim() != 4 || first_row >= k.size(1))
      throw Error("attention_decode: first_row " + std::to_string(first_row) + " is not a row of k " + k.shape().str());
    if (needs_grad({q, k, v})) throw Error("attention_decode: a ring buffer (first_row > 0) has no gradient path");
  }
  if (needs_grad({q, k, v})) return attention(q, k, v, opt);  // the fused kernel records its backward
  if (q.dim() != 4 || k.dim() != 4 || k.shape() != v.shape() || q.size(0) != k.size(0) ||
      q.size(2) != k.size(2) || q.size(3) != k.size(3) || (opt.causal && q.size(1) > k.size(1)) ||
      opt.window < 0 || (opt.window > 0 && !opt.causal))
    return attention(q, k, v, opt);  // which names the mismatch
  const int64_t B = q.size(0), Tq = q.size(1), Tk = k.size(1), H = q.size(2), Dh = q.size(3);
  if (!opt.alibi_slopes.empty() && int64_t(opt.alibi_slopes.size()) != H) return attention(q, k, v, opt);
  const float scale = opt.scale > 0.f ? opt.scale : float(1.0 / std::sqrt(double(Dh)));
  Tensor out = Tensor::empty(q.shape());
  // Tasks: (batch, query) rows, each split into head groups when there are fewer rows than
  // threads (one sequence decoding: the heads share the two cores).
  const int64_t rows = B * Tq, groups = rows >= omp_get_max_threads() ? 1 : std::min<int64_t>(H, omp_get_max_threads());
  const int64_t stride = H * Dh;
  std::vector<float> slope2(size_t(H), 0.f);
  for (int64_t h = 0; h < H && !opt.alibi_slopes.empty(); ++h) slope2[size_t(h)] = opt.alibi_slopes[size_t(h)] * kLog2e;
  const float *pq = q.data(), *pk = k.data(), *pv = v.data();
  float* po = out.data();
#pragma omp parallel if (rows * groups > 1 && rows * Tk * stride > (int64_t(1) << 16))
  {
    std::vector<float> s;
#pragma omp for schedule(static)
    for (int64_t task = 0; task < rows * groups; ++task) {
      const int64_t r = task / groups, g = task % groups, b = r / Tq, i = r % Tq;
      const int64_t h0 = g * H / groups, h1 = (g + 1) * H / groups;
      const int64_t pos = Tk - Tq + i, lo = opt.window ? std::max<int64_t>(0, pos - opt.window + 1) : 0;
      const int64_t n = (opt.causal ? pos + 1 : Tk) - lo;
      s.resize(size_t((h1 - h0) * n));
      const int64_t at_q = (b * Tq + i) * stride + h0 * Dh, at_kv = b * Tk * stride + h0 * Dh;
      attend_heads(pq + at_q, pk + at_kv, pv + at_kv, RingRows{(first_row + lo) % Tk, Tk}, lo, n, stride, h1 - h0,
                   Dh, scale * kLog2e, slope2.data() + h0, pos, s.data(), po + at_q, plain);
    }
  }
  return out;
}

}  // namespace

Tensor attention_decode(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt,
                        int64_t first_row) {
  return decode(q, k, v, opt, first_row, false);
}

Tensor attention_decode_plain(const Tensor& q, const Tensor& k, const Tensor& v,
                              const AttentionOptions& opt, int64_t first_row) {
  return decode(q, k, v, opt, first_row, true);
}

}  // namespace tri
