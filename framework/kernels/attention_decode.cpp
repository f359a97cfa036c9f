// Softmax attention for a few queries against a long KV cache (decoding), no gradient.
// The fused kernel (attention.cpp) packs every head's K^T and V into padded tiles first, which
// pays off when many queries share them; one query per step would copy the whole cache each
// token. Here each query reads its keys and values once, in place, whole rows in order:
//   pass 1: s_j = log2(e) (scale q.k_j + slope (j - pos)) for the visible keys, and their max;
//   pass 2: p_j = 2^(s_j - max), l = sum p_j, out = sum p_j v_j / l.
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
#include "framework/kernels/vec_math.hpp"
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

// Query (b, i) at position pos against heads [h0, h1), the n keys/values at positions
// lo .. lo + n - 1, in rows `ring`: rows of the cache are read whole and in order (all of the
// task's heads per row), so the reads stream through memory once. q, k, v and out point at head
// h0 of their rows; rows are `stride` floats apart; s is scratch of (h1 - h0) n floats.
void attend_heads(const float* q, const float* k, const float* v, RingRows ring, int64_t lo, int64_t n,
                  int64_t stride, int64_t heads, int64_t Dh, float scale2, const float* slope2, int64_t pos,
                  float* s, float* out) {
  std::vector<float> m(size_t(heads), -INFINITY), l(size_t(heads), 0.f);
  for (int64_t j = 0; j < n; ++j) {
    const float* kj = k + ring[j] * stride;
    for (int64_t h = 0; h < heads; ++h) {
      float dot = 0.f;
#pragma omp simd reduction(+ : dot)
      for (int64_t d = 0; d < Dh; ++d) dot += q[h * Dh + d] * kj[h * Dh + d];
      const float x = dot * scale2 + slope2[h] * float(lo + j - pos);
      s[h * n + j] = x;
      m[size_t(h)] = std::max(m[size_t(h)], x);
    }
  }
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

}  // namespace

Tensor attention_decode(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt,
                        int64_t first_row) {
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
                   Dh, scale * kLog2e, slope2.data() + h0, pos, s.data(), po + at_q);
    }
  }
  return out;
}

}  // namespace tri
