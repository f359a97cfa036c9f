// Fused softmax attention: FlashAttention-2 (Dao 2023, Algorithms 1 and 2) on the CPU.
// Forward: for each (batch, head) and each tile of kTile queries, walk the key tiles left to
// right, from the first one a window reaches (key 0 without one) to the causal diagonal,
// keeping the running row max m, row sum l and the unnormalised output. out = acc / l and
// lse = m + log(l) [B, H, Tq] are all that is saved besides q, k and v. Scores are kept in
// base 2 (scaled by log2(e)), so each probability costs one exp2, and lse is saved in base 2 too.
// Backward, per (batch, head): D_i = rowsum(dO_i * O_i); over the tiles forward visited,
// recompute P = exp(S - lse),
//   dV += P^T dO,  dP = dO V^T,  dS = P * (dP - D),  dQ += scale dS K,  dK += scale dS^T Q.
// Which tiles those are: attention_geometry.hpp (a window of W keys: O(T W) per head).
// One thread owns a (batch, head) in backward, so dQ, dK and dV are written without races, and
// every output element is computed by one thread in a fixed order: the same bits at any thread
// count.
// Every product runs through one register-tiled kernel (tile_gemm, framework/simd/tile_kernels.hpp:
// AVX-512 when built for it) on packed copies of the head: head dim zero-padded to a multiple
// of 16 (Dp), keys zero-padded to whole tiles (Tkp).
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "framework/kernels/attention.hpp"
#include "framework/kernels/attention_geometry.hpp"
#include "framework/simd/tile_kernels.hpp"
#include "framework/simd/vec_math.hpp"
#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/runtime.hpp"

namespace tri {

namespace {

using namespace attention_geometry;
using tile_kernels::tile_gemm;
#ifdef __AVX512F__
using tile_kernels::transpose16;
#endif

// Lane partials of one tile row (kTile values): part[u] is the max or sum of x[u], x[u + 16], ...
inline void row_max_parts(const float* x, float* part) {
  for (int u = 0; u < 16; ++u) part[u] = x[u];
  for (int c = 16; c < kTile; c += 16)
#pragma omp simd
    for (int u = 0; u < 16; ++u) part[u] = part[u] < x[c + u] ? x[c + u] : part[u];
}

inline void row_sum_parts(const float* x, float* part) {
  for (int u = 0; u < 16; ++u) part[u] = 0.f;
  for (int c = 0; c < kTile; c += 16)
#pragma omp simd
    for (int u = 0; u < 16; ++u) part[u] += x[c + u];
}

// n rows of a head (`stride` apart) into dst [rows][Dp]; columns past Dh and rows past n are 0.
void pack_rows(const Geometry& g, const float* src, int64_t n, int64_t rows, float* dst) {
  for (int64_t t = 0; t < n; ++t) {  // rows of a few dozen floats: a plain loop beats memcpy
    const float* s = src + t * g.stride();
    float* o = dst + t * g.Dp;
#pragma omp simd
    for (int64_t d = 0; d < g.Dp; ++d) o[d] = d < g.Dh ? s[d] : 0.f;
  }
  std::fill(dst + n * g.Dp, dst + rows * g.Dp, 0.f);
}

// Those rows laid out as pack_rows lays them: in place when the head's rows already are (one
// head, Dh a multiple of 16, no padding rows), else packed into dst. (H Dh = Dp is not enough:
// with two heads of 8, the columns past Dh would hold the other head's.)
const float* packed_rows(const Geometry& g, const float* src, int64_t n, int64_t rows, float* dst) {
  if (g.H == 1 && g.Dh == g.Dp && n == rows) return src;
  pack_rows(g, src, n, rows, dst);
  return dst;
}

// The same rows transposed into dst [Dp][cols]; entries past Dh or n are 0.
void pack_columns(const Geometry& g, const float* src, int64_t n, int64_t cols, float* dst) {
  constexpr int64_t kBlock = 16;  // rows per step: one vector of each output row
  const int64_t stride = g.stride();
  int64_t t0 = 0;
  for (; t0 + kBlock <= n; t0 += kBlock) {
    int64_t d = 0;
#ifdef __AVX512F__
    for (; d + 16 <= g.Dh; d += 16)
      transpose16(src + t0 * stride + d, stride, dst + d * cols + t0, cols);
#endif
    for (; d < g.Dh; ++d) {
      const float* s = src + t0 * stride + d;
      float* o = dst + d * cols + t0;
#pragma omp simd
      for (int64_t u = 0; u < kBlock; ++u) o[u] = s[u * stride];
    }
  }
  for (int64_t d = 0; d < g.Dh; ++d) {
    for (int64_t t = t0; t < n; ++t) dst[d * cols + t] = src[t * stride + d];
    std::fill(dst + d * cols + n, dst + (d + 1) * cols, 0.f);
  }
  std::fill(dst + g.Dh * cols, dst + g.Dp * cols, 0.f);
}

// Folds the 16 lane partials of each of 16 rows in lane order (for each row: lane 0, 1, ...),
// transposed first so that the fold runs across the rows in vectors.
void transpose_parts(const float (&part)[16][16], float (&lanes)[16][16]) {
#ifdef __AVX512F__
  transpose16(&part[0][0], 16, &lanes[0][0], 16);
#else
  for (int r = 0; r < 16; ++r)
    for (int u = 0; u < 16; ++u) lanes[u][r] = part[r][u];
#endif
}

void fold_max(const float (&part)[16][16], float* out) {
  float lanes[16][16];
  transpose_parts(part, lanes);
  for (int r = 0; r < 16; ++r) out[r] = lanes[0][r];
  for (int u = 1; u < 16; ++u)
#pragma omp simd
    for (int r = 0; r < 16; ++r) out[r] = out[r] < lanes[u][r] ? lanes[u][r] : out[r];
}

void fold_sum(const float (&part)[16][16], float* out) {
  float lanes[16][16];
  transpose_parts(part, lanes);
  for (int r = 0; r < 16; ++r) out[r] = 0.f;
  for (int u = 0; u < 16; ++u)
#pragma omp simd
    for (int r = 0; r < 16; ++r) out[r] += lanes[u][r];
}

// Base-2 scores of query row `pos` against the key tile starting at j0, in place:
// s = log2(e) (scale * q.k + slope * (j - pos)) for the keys the row can see, -inf for the others.
inline void score_row(const Geometry& g, float* s, int64_t pos, int64_t j0, float slope) {
  const int64_t begin = g.key_begin(pos) - j0, end = (g.causal ? std::min(g.Tk, pos + 1) : g.Tk) - j0;
  // Float comparisons: GCC vectorises the select only then.
  const float first = float(std::clamp<int64_t>(begin, -1, kTile)),
              visible = float(std::clamp<int64_t>(end, -1, kTile)), scale = g.scale * g.kLog2e,
              rel0 = float(j0 - pos);
#pragma omp simd
  for (int64_t j = 0; j < kTile; ++j) {
    const float x = s[j] * scale + slope * (rel0 + float(j));
    s[j] = float(j) < visible && float(j) >= first ? x : -INFINITY;
  }
}

// The two kinds of product over a tile of n query rows, each restricted for every group of 16
// rows to the key columns it sees, cols(r0) (one product over the whole tile when `full`):
// scores C[r][0, cols) = A[r] B[:, 0, cols) (rows of A a_m apart, over k_dim), and sums over
// keys C[r] += A[r][0, cols) B[0, cols) (A's rows lda apart, C n_dim wide).
template <class Cols>
void tile_scores(bool full, int64_t n, int64_t k_dim, const float* a, int64_t a_m, const float* b,
                 int64_t ldb, float* c, Cols cols) {
  if (full) return tile_gemm(n, kTile, k_dim, a, a_m, 1, b, ldb, c, kTile, false);
  for (int64_t r0 = 0; r0 < n; r0 += 16)
    if (const int64_t c0 = cols(r0); c0 > 0)
      tile_gemm(std::min<int64_t>(16, n - r0), c0, k_dim, a + r0 * a_m, a_m, 1, b, ldb,
                c + r0 * kTile, kTile, false);
}

template <class Cols>
void tile_key_sums(bool full, int64_t n, int64_t n_dim, const float* a, const float* b, float* c, Cols cols) {
  if (full) return tile_gemm(n, n_dim, kTile, a, kTile, 1, b, n_dim, c, n_dim, true);
  for (int64_t r0 = 0; r0 < n; r0 += 16)
    if (const int64_t c0 = cols(r0); c0 > 0)
      tile_gemm(std::min<int64_t>(16, n - r0), n_dim, c0, a + r0 * kTile, kTile, 1, b, n_dim,
                c + r0 * n_dim, n_dim, true);
}

// Forward of one query tile [i0, i0 + n) of head bh. kt: K^T [Dp][ldt]; vp: V [Tkp][Dp].
void forward_tile(const Geometry& g, int64_t bh, int64_t i0, int64_t n, const float* q,
                  const float* kt, const float* vp, float* out, float* lse, float* scratch) {
  const int64_t Dp = g.Dp;
  float *s = scratch + kTile * Dp, *acc = s + kTile * kTile, *m = acc + kTile * Dp, *l = m + kTile;
  const float* qt = packed_rows(g, q + g.at(g.Tq, bh, i0), n, n, scratch);
  std::fill(acc, acc + n * Dp, 0.f);
  std::fill(m, m + n, -INFINITY);
  std::fill(l, l + n, 0.f);
  const float slope = g.slope2(bh % g.H);
  const int64_t key_begin = g.key_begin(g.shift + i0) / kTile * kTile, key_end = g.key_end(i0 + n);
  for (int64_t j0 = key_begin; j0 < key_end; j0 += kTile) {
    auto cols = [&](int64_t r0) { return visible_cols(g, g.shift + i0 + std::min(n, r0 + 16) - 1, j0); };
    const bool full = cols(0) == kTile;  // then every group sees the whole tile
    tile_scores(full, n, Dp, qt, Dp, kt + j0, g.ldt(), s, cols);  // S = Q K^T
    // Online softmax, by groups of 16 rows (the row max and sum fold 16 rows at once). A row
    // that sees no key of this tile keeps m (alpha = 1) and gets p = 0; with a window, a row may
    // see none of the first tiles either: m stays -inf, and exponents are taken against 0
    // (-inf - -inf would be NaN), so p = 0, alpha = 0 and acc and l stay 0.
    for (int64_t r0 = 0; r0 < n; r0 += 16) {
      const int64_t rows = std::min<int64_t>(16, n - r0);
      float part[16][16] = {}, fold[16], alpha[16];
      for (int64_t r = 0; r < rows; ++r) {
        float* sr = s + (r0 + r) * kTile;
        score_row(g, sr, g.shift + i0 + r0 + r, j0, slope);
        row_max_parts(sr, part[r]);
      }
      fold_max(part, fold);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = r0 + r;
        float* sr = s + i * kTile;
        const float m_new = std::max(m[i], fold[r]), m_ref = m_new == -INFINITY ? 0.f : m_new;
        alpha[r] = exp2_neg(m[i] - m_ref);
#pragma omp simd
        for (int64_t j = 0; j < kTile; ++j) sr[j] = exp2_neg(sr[j] - m_ref);
        row_sum_parts(sr, part[r]);
        m[i] = m_new;
        if (alpha[r] != 1.f)
          for (int64_t d = 0; d < Dp; ++d) acc[i * Dp + d] *= alpha[r];
      }
      fold_sum(part, fold);
      for (int64_t r = 0; r < rows; ++r) l[r0 + r] = l[r0 + r] * alpha[r] + fold[r];
    }
    tile_key_sums(full, n, Dp, s, vp + j0 * Dp, acc, cols);  // acc += P V
  }
  for (int64_t r = 0; r < n; ++r) {
    float* o = out + g.at(g.Tq, bh, i0 + r);
    const float inv = 1.f / l[r];
    for (int64_t d = 0; d < g.Dh; ++d) o[d] = acc[r * Dp + d] * inv;
    lse[bh * g.Tq + i0 + r] = m[r] + std::log2(l[r]);
  }
}

// A head's K^T [Dp][ldt] packed into dst, and its V [Tkp][Dp], packed after it or in place.
const float* pack_keys(const Geometry& g, const float* k, const float* v, int64_t bh, float* dst) {
  pack_columns(g, k + g.at(g.Tk, bh, 0), g.Tk, g.ldt(), dst);
  return packed_rows(g, v + g.at(g.Tk, bh, 0), g.Tk, g.Tkp, dst + g.ldt() * g.Dp);
}

void forward(const Geometry& g, const float* q, const float* k, const float* v, float* out,
             float* lse) {
  const int64_t BH = g.B * g.H, head = (g.ldt() + g.Tkp) * g.Dp;  // K^T and V
  const int64_t q_tiles = (g.Tq + kTile - 1) / kTile;
  const int64_t tile_floats = 2 * kTile * g.Dp + kTile * kTile + 2 * kTile;
  const int64_t threads = omp_get_max_threads();
  // With heads enough to share out, a task is one head, packed into its thread's scratch and
  // used while it is in cache. With few heads, a task is one query tile, so that long heads
  // still spread over the threads.
  if (BH >= 4 * threads) {
    Tensor scratch = Tensor::empty(Shape{threads, head + tile_floats});
#pragma omp parallel
    {
      float* mine = scratch.data() + omp_get_thread_num() * (head + tile_floats);
#pragma omp for schedule(dynamic)
      for (int64_t bh = 0; bh < BH; ++bh) {
        const float* vp = pack_keys(g, k, v, bh, mine);
        for (int64_t i0 = (q_tiles - 1) * kTile; i0 >= 0; i0 -= kTile)  // costliest first
          forward_tile(g, bh, i0, std::min(kTile, g.Tq - i0), q, mine, vp, out, lse, mine + head);
      }
    }
    return;
  }
  Tensor packed = Tensor::empty(Shape{BH, head});
  float* pk = packed.data();
  std::vector<const float*> vp(size_t(BH), nullptr);
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < BH; ++bh) vp[size_t(bh)] = pack_keys(g, k, v, bh, pk + bh * head);
  Tensor scratch = Tensor::empty(Shape{threads, tile_floats});
#pragma omp parallel
  {
    float* mine = scratch.data() + omp_get_thread_num() * tile_floats;
    // Costliest tasks first (the last query tiles see the most keys when causal).
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < BH * q_tiles; ++task) {
      const int64_t bh = task % BH, i0 = (q_tiles - 1 - task / BH) * kTile;
      forward_tile(g, bh, i0, std::min(kTile, g.Tq - i0), q, pk + bh * head, vp[size_t(bh)],
                   out, lse, mine);
    }
  }
}

// Per-thread scratch of the backward pass of one head.
struct BackwardScratch {
  float *qp, *dop, *dq;  // Q, dO [Tq][Dp]; the dQ accumulator
  float *kt, *vt, *kp;   // K^T, V^T [Dp][ldt]; K [Tkp][Dp]
  float *dk, *dv;        // dK, dV of the current key tile [kTile][Dp]
  float *p, *ds;         // P and dP -> dS of the current tile [kTile][kTile]
  float* delta;          // D = rowsum(dO * O) [Tq]

  static int64_t floats(const Geometry& g) {
    return 3 * g.Tq * g.Dp + (2 * g.ldt() + g.Tkp) * g.Dp + 2 * g.Dp * kTile + 2 * kTile * kTile + g.Tq;
  }
  BackwardScratch(const Geometry& g, float* base) {
    float* x = base;
    auto take = [&x](int64_t n) { float* r = x; x += n; return r; };
    qp = take(g.Tq * g.Dp), dop = take(g.Tq * g.Dp), dq = take(g.Tq * g.Dp);
    kt = take(g.ldt() * g.Dp), vt = take(g.ldt() * g.Dp), kp = take(g.Tkp * g.Dp);
    dk = take(kTile * g.Dp), dv = take(kTile * g.Dp);
    p = take(kTile * kTile), ds = take(kTile * kTile);
    delta = take(g.Tq);
  }
};

// A gradient of q, k or v. The backward sets each of its elements once, so a fresh buffer
// (uninitialised) is written, `0.f + x` (the bits of an add into zeros), instead of added into.
struct HeadGrad {
  float* data = nullptr;
  bool fresh = false;
};

// Rows t0 .. t0 + n of acc [n][Dp] into head bh of grad [B, T, H, Dh].
void store_rows(const Geometry& g, int64_t T, const float* acc, int64_t bh, int64_t t0, int64_t n,
                HeadGrad grad) {
  for (int64_t t = 0; t < n; ++t) {
    float* gr = grad.data + g.at(T, bh, t0 + t);
    const float* a = acc + t * g.Dp;
    if (grad.fresh) {
#pragma omp simd
      for (int64_t d = 0; d < g.Dh; ++d) gr[d] = 0.f + a[d];
    } else {
#pragma omp simd
      for (int64_t d = 0; d < g.Dh; ++d) gr[d] += a[d];
    }
  }
}

void backward_head(const Geometry& g, int64_t bh, const float* q, const float* k, const float* v,
                   const float* out, const float* lse, const float* gout, HeadGrad gq, HeadGrad gk,
                   HeadGrad gv, BackwardScratch& w) {
  const int64_t Dp = g.Dp, Tkp = g.Tkp;
  const float* qp = packed_rows(g, q + g.at(g.Tq, bh, 0), g.Tq, g.Tq, w.qp);
  const float* dop = packed_rows(g, gout + g.at(g.Tq, bh, 0), g.Tq, g.Tq, w.dop);
  pack_columns(g, k + g.at(g.Tk, bh, 0), g.Tk, g.ldt(), w.kt);
  pack_columns(g, v + g.at(g.Tk, bh, 0), g.Tk, g.ldt(), w.vt);
  const float* kp = packed_rows(g, k + g.at(g.Tk, bh, 0), g.Tk, Tkp, w.kp);
  std::fill(w.dq, w.dq + g.Tq * Dp, 0.f);
  tile_kernels::row_dots(g.Tq, g.Dh, dop, Dp, out + g.at(g.Tq, bh, 0), g.stride(), w.delta);
  const float* lse_head = lse + bh * g.Tq;
  const float slope = g.slope2(bh % g.H);
  for (int64_t j0 = 0; j0 < g.Tk; j0 += kTile) {
    std::fill(w.dk, w.dk + kTile * Dp, 0.f);
    std::fill(w.dv, w.dv + kTile * Dp, 0.f);
    // Causal: the query tiles before the first row that sees key j0 contribute nothing, nor,
    // with a window, those from the first row past the window of the tile's last key.
    const int64_t i_first = g.causal ? std::max<int64_t>(0, j0 - g.shift) / kTile * kTile : 0;
    const int64_t i_end = g.query_end(j0 + kTile);
    for (int64_t i0 = i_first; i0 < i_end; i0 += kTile) {
      const int64_t n = std::min(kTile, g.Tq - i0);
      float *p = w.p, *ds = w.ds;
      auto cols = [&](int64_t r0) { return visible_cols(g, g.shift + i0 + std::min(n, r0 + 16) - 1, j0); };
      const bool full = cols(0) == kTile && first_row_seeing(g, i0, n, j0 + kTile - 1) == 0;
      // The products with the query rows as their sum (dV, dK) start, for each group of 16
      // keys, at the first row that sees the group's first key.
      auto by_keys = [&](const float* a, const float* b, float* c) {
        if (full) return tile_gemm(kTile, Dp, n, a, 1, kTile, b, Dp, c, Dp, true);
        for (int64_t c0 = 0; c0 < kTile; c0 += 16) {
          const int64_t r = first_row_seeing(g, i0, n, j0 + c0);
          if (r < n && c0 < cols(n - 1))
            tile_gemm(16, Dp, n - r, a + r * kTile + c0, 1, kTile, b + r * Dp, Dp, c + c0 * Dp, Dp, true);
        }
      };
      tile_scores(full, n, Dp, qp + i0 * Dp, Dp, w.kt + j0, g.ldt(), p, cols);
      for (int64_t r = 0; r < n; ++r) {  // P = 2^(S - lse), both in base 2
        float* pr = p + r * kTile;
        score_row(g, pr, g.shift + i0 + r, j0, slope);
        const float lse_r = lse_head[i0 + r];
#pragma omp simd
        for (int64_t j = 0; j < kTile; ++j) pr[j] = exp2_neg(pr[j] - lse_r);
      }
      if (gv.data) by_keys(p, dop + i0 * Dp, w.dv);  // dV += P^T dO
      if (!gq.data && !gk.data) continue;
      tile_scores(full, n, Dp, dop + i0 * Dp, Dp, w.vt + j0, g.ldt(), ds, cols);  // dP = dO V^T
      for (int64_t r = 0; r < n; ++r) {  // dS = P * (dP - D), with the scale folded in
        const float delta = w.delta[i0 + r];
        float *dsr = ds + r * kTile, *pr = p + r * kTile;
        const int64_t c_end = full ? kTile : cols(r / 16 * 16);  // past it: not computed, not read
#pragma omp simd
        for (int64_t j = 0; j < c_end; ++j) dsr[j] = pr[j] * (dsr[j] - delta) * g.scale;
      }
      if (gq.data) tile_key_sums(full, n, Dp, ds, kp + j0 * Dp, w.dq + i0 * Dp, cols);  // dQ += dS K
      if (gk.data) by_keys(ds, qp + i0 * Dp, w.dk);  // dK += dS^T Q
    }
    const int64_t n_keys = std::min(kTile, g.Tk - j0);
    if (gk.data) store_rows(g, g.Tk, w.dk, bh, j0, n_keys, gk);
    if (gv.data) store_rows(g, g.Tk, w.dv, bh, j0, n_keys, gv);
  }
  if (gq.data) store_rows(g, g.Tq, w.dq, bh, 0, g.Tq, gq);
}

// The sizes of an attention call, checked (shared by the fused and the naive version).
struct AttentionShape {
  int64_t B, Tq, Tk, H, Dh;
  float scale;  // resolved: 1/sqrt(Dh) when the option is 0
};

AttentionShape attention_shape(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                               const AttentionOptions& opt) {
  auto fail = [&](const std::string& why) {
    return Error(std::string(op) + ": q " + q.shape().str() + ", k " + k.shape().str() + ", v " +
                 v.shape().str() + ": " + why);
  };
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    throw fail("expected q [B, Tq, H, Dh] and k, v [B, Tk, H, Dh]");
  if (k.shape() != v.shape()) throw fail("k and v must have one shape");
  if (q.size(0) != k.size(0) || q.size(2) != k.size(2) || q.size(3) != k.size(3))
    throw fail("B, H and Dh of q must match k");
  AttentionShape s{q.size(0), q.size(1), k.size(1), q.size(2), q.size(3), opt.scale};
  if (s.Tk < 1 || s.Dh < 1) throw fail("need Tk >= 1 and Dh >= 1");
  if (opt.window < 0)
    throw fail("window " + std::to_string(opt.window) + " must be >= 0 (0: every key up to the query)");
  if (opt.window > 0 && !opt.causal) throw fail("a window needs causal attention");
  if (opt.causal && s.Tq > s.Tk)
    throw fail("causal attention needs Tq <= Tk (queries sit at the last Tq key positions)");
  if (!opt.alibi_slopes.empty() && int64_t(opt.alibi_slopes.size()) != s.H)
    throw fail(std::to_string(opt.alibi_slopes.size()) + " ALiBi slopes given, expected 0 or " +
               std::to_string(s.H) + " (one per head)");
  if (!(opt.scale >= 0.f))
    throw fail("scale " + std::to_string(opt.scale) + " must be >= 0 (0 means 1/sqrt(Dh))");
  if (s.scale == 0.f) s.scale = float(1.0 / std::sqrt(double(s.Dh)));
  return s;
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt) {
  const AttentionShape s = attention_shape("attention", q, k, v, opt);
  Geometry g{s.B, s.Tq, s.Tk, s.H, s.Dh, round_up(s.Dh, 16), round_up(s.Tk, kTile),
             s.Tk - s.Tq, s.scale, opt.causal, opt.window, opt.alibi_slopes};
  Tensor out = Tensor::empty(q.shape());
  Tensor lse = Tensor::empty(Shape{s.B, s.H, s.Tq});
  if (s.Tq == 0) return out;
  forward(g, q.data(), k.data(), v.data(), out.data(), lse.data());
  // The FLOP counter (runtime.hpp): 2 Dh per visible (query, key) pair for Q K^T and for P V.
  const int64_t pairs_dh = visible_pairs(g) * g.Dh * g.B * g.H;
  add_flops(4 * pairs_dh);
  if (!needs_grad({q, k, v})) return out;
  record("attention", out, {q, k, v, out}, [q, k, v, out, lse, g, pairs_dh](const float* gout) {
    HeadGrad gq, gk, gv;
    if (q.same(k) || q.same(v) || k.same(v)) {  // one buffer for two: both add into it
      gq.data = grad_of(q), gk.data = grad_of(k), gv.data = grad_of(v);
    } else {
      gq.data = grad_for_write(q, &gq.fresh), gk.data = grad_for_write(k, &gk.fresh);
      gv.data = grad_for_write(v, &gv.fresh);
    }
    add_flops(10 * pairs_dh);  // the scores again, dV, dP, dQ and dK
    const int64_t per_thread = BackwardScratch::floats(g);
    Tensor scratch = Tensor::empty(Shape{int64_t(omp_get_max_threads()), per_thread});
#pragma omp parallel
    {
      BackwardScratch w(g, scratch.data() + omp_get_thread_num() * per_thread);
#pragma omp for schedule(dynamic)
      for (int64_t bh = 0; bh < g.B * g.H; ++bh)
        backward_head(g, bh, q.data(), k.data(), v.data(), out.data(), lse.data(), gout, gq, gk,
                      gv, w);
    }
  });
  return out;
}

// Composed from differentiable ops, so its backward comes from theirs:
// softmax(scale * Q K^T + bias) V per head, bias [H, Tq, Tk] = ALiBi + causal mask (-inf), which
// with a window also masks the keys j <= pos - window.
Tensor attention_naive(const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionOptions& opt, Tensor* probs) {
  const AttentionShape s = attention_shape("attention_naive", q, k, v, opt);
  const Tensor qh = permute(q, {0, 2, 1, 3}), kh = permute(k, {0, 2, 1, 3}),
               vh = permute(v, {0, 2, 1, 3});  // [B, H, T, Dh]
  Tensor scores = mul_scalar(matmul(qh, kh, false, true), s.scale);
  if (opt.causal || !opt.alibi_slopes.empty()) {
    Tensor bias = Tensor::zeros(Shape{s.H, s.Tq, s.Tk});
    float* pb = bias.data();
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i)
        for (int64_t j = 0; j < s.Tk; ++j) {
          const int64_t pos = s.Tk - s.Tq + i;
          float& b = pb[(h * s.Tq + i) * s.Tk + j];
          if (!opt.alibi_slopes.empty()) b = opt.alibi_slopes[size_t(h)] * float(j - pos);
          if (opt.causal && (j > pos || (opt.window > 0 && j <= pos - opt.window))) b = -INFINITY;
        }
    scores = add(scores, bias);
  }
  const Tensor p = softmax(scores);
  if (probs) *probs = p;
  return permute(matmul(p, vh), {0, 2, 1, 3});
}

}  // namespace tri
