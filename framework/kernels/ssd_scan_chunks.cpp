// The SSD scan's backward in chunks of L = kChunk steps, as products of small matrices (the
// paper's chunked form, here for the gradient only: the forward stays the recurrence, so
// decoding keeps its bits). Per (batch, head), within a chunk with steps t, i in [0, L):
//   Xd_i = dt_i x_i,  Lam_ti = a_{i+1} ... a_t (i < t), 1 (i = t), 0 (i > t)
//   E_t = a_0 ... a_t,  W_i = Lam_{L-1,i},  S0 the state before the chunk ([P][N], saved), S_L after
//   M = (C B^T) o Lam          Y = M Xd + diag(E) C S0^T + D X,   S_L = E_{L-1} S0 + Xd^T diag(W) B
// Given dY and dS = d S_L (zero after the last chunk):
//   dXd = M^T dY + diag(W) B dS^T               dM = dY Xd^T,  dG = dM o Lam
//   dC = dG B + U,  U = diag(E) dY S0           dB = dG^T C + diag(W) Xd dS   (summed over heads)
//   d l_j (l = log a) = sum_{t >= j > i} dM_ti M_ti + sum_{t >= j} U_t . C_t
//                     + sum_{i < j} W_i (Xd dS)_i . B_i + E_{L-1} <dS, S0>
//   dx = dt dXd + D dY,  ddt = x . dXd + A dl,  dA = sum dt dl,  dD = sum dY . x
//   dS <- E_{L-1} dS + dY^T diag(E) C            (now w.r.t. S0: the chunk before)
// The L x L products use only the blocks of 16 rows on and below the diagonal. The heads of a
// group share B and C: C B^T is computed once, and dG B and dG^T C once on dG summed over them.
// At P = N = 64 and 2 heads a group this is about 5.3 P N multiply-adds a step at the matrix
// product's rate, where the recurrent backward (ssd_scan.cpp) runs 9 P N at about half of the FMA
// peak. The sums differ from the recurrence's in order: the gradients agree to float32 rounding
// (test_ssd_scan).
#include <algorithm>
#include <cstdint>
#include <utility>

#include "framework/kernels/ssd_rows.hpp"
#include "framework/simd/tile_kernels.hpp"

namespace tri::ssd_detail {

namespace {

constexpr int64_t L = kChunk;
static_assert(L % 16 == 0, "the chunk's L x L products run in blocks of 16 rows");

using tile_kernels::tile_gemm;

// dst[c][r] = src[r][c] for rows x cols, both multiples of 16.
void transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
#ifdef __AVX512F__
  for (int64_t r = 0; r < rows; r += 16)
    for (int64_t c = 0; c < cols; c += 16) tile_kernels::transpose16(src + r * cols + c, cols, dst + c * rows + r, rows);
#else
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
#endif
}

// sum_k a[k] b[k] over n, a multiple of 16.
float dot(const float* a, const float* b, int64_t n) {
  Lanes acc = {};
  for (int64_t k = 0; k < n; k += kLanes) acc = lanes::fma(ld(a + k), ld(b + k), acc);
  return hsum(acc);
}

void scaled(const float* __restrict src, float f, int64_t n, float* __restrict dst) {
  for (int64_t k = 0; k < n; ++k) dst[k] = f * src[k];
}

// The sum of cs's first j values (cs: L floats in vectors).
float sum_below(const Lanes* cs, int64_t j) {
  float below = 0.f;
  for (int64_t v = 0; v * kLanes < j; ++v) {
    Lanes part = cs[v];
    for (int l = 0; l < kLanes; ++l)
      if (v * kLanes + l >= j) part[l] = 0.f;
    below += hsum(part);
  }
  return below;
}

// Asks for the next chunk's step t (the group's B and C rows, each head's x and d y rows, the
// gradient rows for writing) and the i-th of each head's saved state's kChunk parts into L2, one
// step per step of this chunk's first pass, so that they arrive while this chunk's products run:
// the inputs are cold (the forward wrote them long before), and a chunk's loads, in one burst
// (into L1), waited on memory. Inlined always, as lanes::prefetch: GCC drops calls to a function
// that only prefetches.
[[gnu::always_inline]] inline void prefetch_step(const Dims& d, const ChunkHead* heads, int64_t c, int64_t t,
                                                 int64_t i) {
  const int64_t P = d.P, N = d.N, part = P * N / L;
  auto into_l2 = [](const float* p, int64_t n, bool write) {
    for (int64_t k = 0; k < n; k += kLanes) write ? __builtin_prefetch(p + k, 1, 1) : __builtin_prefetch(p + k, 0, 1);
  };
  const HeadRows& r0 = heads[0].r;
  const GradRows& g0 = heads[0].gr;
  into_l2(r0.B + t * r0.sbc, N, false);
  into_l2(r0.C + t * r0.sbc, N, false);
  for (float* g : {g0.B, g0.C})
    if (g) into_l2(g + t * g0.sBC, N, true);
  for (int64_t j = 0; j < d.hg; ++j) {
    const ChunkHead& h = heads[j];
    into_l2(h.r.x + t * h.r.sx, P, false);
    into_l2(h.gout + t * h.r.sx, P, false);
    if (h.gr.x) into_l2(h.gr.x + t * h.r.sx, P, true);
    into_l2(h.ckpt + c * P * N + i * part, part, false);
  }
}

}  // namespace

ChunkedBackward::ChunkedBackward(const Dims& d)
    : d_(d), Bc_(size_t(L * d.N)), BcT_(size_t(d.N * L)), Cc_(size_t(L * d.N)), CBt_(size_t(L * L)),
      dGsum_(size_t(L * L)), dB_(size_t(L * d.N)), dC_(size_t(L * d.N)), Xd_(size_t(L * d.P)), XdT_(size_t(d.P * L)),
      dY_(size_t(L * d.P)), Lam_(size_t(L * L)), M_(size_t(L * L)), dG_(size_t(L * L)), q_(size_t(L * L)),
      S0T_(size_t(d.N * d.P)), dS_(size_t(d.hg * d.P * d.N)), dST_(size_t(d.N * d.P)), U_(size_t(L * d.N)),
      dXd_(size_t(L * d.P)), XdS_(size_t(L * d.N)), WB_(size_t(L * d.N)), EC_(size_t(L * d.N)),
      EdY_(size_t(L * d.P)), E_(size_t(L)), W_(size_t(L)), dl_(size_t(L)), dA_(size_t(d.hg)),
      dD_(size_t(d.hg * kLanes)) {}  // zeroed: above the diagonal blocks C B^T and dG stay 0

void ChunkedBackward::group(const ChunkHead* heads) {
  const int64_t N = d_.N, T = d_.T;
  const HeadRows& r = heads[0].r;
  const GradRows& gr = heads[0].gr;
  float *Bc = Bc_.data(), *Cc = Cc_.data(), *CBt = CBt_.data(), *dGsum = dGsum_.data(), *dB = dB_.data(),
        *dC = dC_.data();
  std::fill(dS_.begin(), dS_.end(), 0.f);
  std::fill(dA_.begin(), dA_.end(), 0.f);
  std::fill(dD_.begin(), dD_.end(), 0.f);
  for (int64_t c = (T + L - 1) / L - 1; c >= 0; --c) {
    const int64_t t0 = c * L, steps = std::min(L, T - t0);  // steps past T: no input, a = 1
    for (int64_t i = 0; i < L; ++i) {
      if (c > 0) prefetch_step(d_, heads, c - 1, t0 - L + i, i);
      if (i < steps) {
        copy_row(r.B + (t0 + i) * r.sbc, N, Bc + i * N);
        copy_row(r.C + (t0 + i) * r.sbc, N, Cc + i * N);
      } else {
        for (float* row : {Bc + i * N, Cc + i * N}) std::fill(row, row + N, 0.f);
      }
    }
    transpose(Bc, L, N, BcT_.data());
    for (int64_t tb = 0; tb < L / 16; ++tb)  // C B^T, blocks on and below the diagonal
      tile_gemm(16, (tb + 1) * 16, N, Cc + tb * 16 * N, N, 1, BcT_.data(), L, CBt + tb * 16 * L, L, false);
    std::fill(dGsum_.begin(), dGsum_.end(), 0.f);
    std::fill(dB_.begin(), dB_.end(), 0.f);
    std::fill(dC_.begin(), dC_.end(), 0.f);
    for (int64_t j = 0; j < d_.hg; ++j) head_chunk(heads[j], j, c);
    // The heads' dG B and dG^T C at once: (sum over heads of dG) B, rows t: i <= t; ^T C, rows i: t >= i.
    for (int64_t tb = 0; tb < L / 16; ++tb)
      tile_gemm(16, N, (tb + 1) * 16, dGsum + tb * 16 * L, L, 1, Bc, N, dC + tb * 16 * N, N, true);
    for (int64_t ib = 0; ib < L / 16; ++ib)
      tile_gemm(16, N, L - ib * 16, dGsum + ib * 16 * L + ib * 16, 1, L, Cc + ib * 16 * N, N, dB + ib * 16 * N, N,
                true);
    for (int64_t i = 0; i < steps; ++i)
      for (auto [dst, src] : {std::pair{gr.B, dB + i * N}, std::pair{gr.C, dC + i * N}}) {
        if (!dst) continue;
        float* __restrict o = dst + (t0 + i) * gr.sBC;
        for (int64_t n = 0; n < N; ++n) o[n] += src[n];
      }
  }
  for (int64_t j = 0; j < d_.hg; ++j) {
    if (heads[j].gr.A) *heads[j].gr.A = dA_[size_t(j)];
    if (heads[j].gr.D) *heads[j].gr.D = hsum(ld(dD_.data() + j * kLanes));
  }
}

// Head j's part of chunk c: its gradients of x and dt, its sums for A and D, its terms of the
// group's dG, dB and dC, and its d state carried to the chunk before.
void ChunkedBackward::head_chunk(const ChunkHead& h, int64_t j, int64_t c) {
  const int64_t P = d_.P, N = d_.N, t0 = c * L, steps = std::min(L, d_.T - t0);
  const HeadRows& r = h.r;
  const float* S0 = h.ckpt + c * P * N;
  float *Xd = Xd_.data(), *dY = dY_.data(), *Lam = Lam_.data(), *M = M_.data(), *dG = dG_.data(), *q = q_.data();
  float *dS = dS_.data() + j * P * N, *U = U_.data(), *dXd = dXd_.data(), *XdS = XdS_.data(), *E = E_.data();
  float *W = W_.data(), *dl = dl_.data(), *Bc = Bc_.data(), *Cc = Cc_.data();
  float e = 1.f;
  for (int64_t i = 0; i < L; ++i) {
    const int64_t t = t0 + i;
    if (i < steps) {
      scaled(r.x + t * r.sx, r.dt[t * r.sdt], P, Xd + i * P);
      copy_row(h.gout + t * r.sx, P, dY + i * P);
    } else {
      for (float* row : {Xd + i * P, dY + i * P}) std::fill(row, row + P, 0.f);
    }
    const float ai = i < steps ? h.a[t] : 1.f;
    float* __restrict row = Lam + i * L;  // row i - 1 times a_i (0 from column i on), then the diagonal
    if (i == 0) {
      std::fill(row, row + L, 0.f);
    } else {
      const float* __restrict above = row - L;
      for (int64_t k = 0; k < L; ++k) row[k] = above[k] * ai;
    }
    row[i] = 1.f;
    E[i] = e *= ai;
  }
  const float eL = E[L - 1];
  copy_row(Lam + (L - 1) * L, L, W);
  transpose(Xd, L, P, XdT_.data());
  transpose(S0, P, N, S0T_.data());
  transpose(dS, P, N, dST_.data());
  for (int64_t tb = 0; tb < L / 16; ++tb)  // dM = dY Xd^T, blocks on and below the diagonal
    tile_gemm(16, (tb + 1) * 16, P, dY + tb * 16 * P, P, 1, XdT_.data(), L, dG + tb * 16 * L, L, false);
  float* dGsum = dGsum_.data();
  for (int64_t k = 0; k < L * L; k += kLanes) {  // M = C B^T o Lam, dG = dM o Lam, q = dM o M
    const Lanes lam = ld(Lam + k), m = ld(CBt_.data() + k) * lam, dm = ld(dG + k), dg = dm * lam;
    st(M + k, m);
    st(dG + k, dg);
    st(q + k, dm * m);
    st(dGsum + k, ld(dGsum + k) + dg);
  }
  for (int64_t ib = 0; ib < L / 16; ++ib)  // dXd = M^T dY (rows i: t >= i)
    tile_gemm(16, P, L - ib * 16, M + ib * 16 * L + ib * 16, 1, L, dY + ib * 16 * P, P, dXd + ib * 16 * P, P, false);
  for (int64_t i = 0; i < L; ++i) scaled(Bc + i * N, W[i], N, WB_.data() + i * N);
  tile_gemm(L, P, N, WB_.data(), N, 1, dST_.data(), P, dXd, P, true);  // + diag(W) B dS^T
  tile_gemm(L, N, P, Xd, P, 1, dS, N, XdS, N, false);                  // Xd dS
  for (int64_t i = 0; i < L; ++i) scaled(dY + i * P, E[i], P, EdY_.data() + i * P);
  tile_gemm(L, N, P, EdY_.data(), P, 1, S0, N, U, N, false);  // U = diag(E) dY S0
  float *dB = dB_.data(), *dC = dC_.data();
  for (int64_t k = 0; k < L * N; ++k) dC[k] += U[k];
  for (int64_t i = 0; i < L; ++i)
    for (int64_t n = 0; n < N; ++n) dB[i * N + n] += W[i] * XdS[i * N + n];
  // d l: the pairs through Lam (cs[i] = sum over t >= k of q_ti), E (suffix), W (prefix), e_L.
  const float whole = eL * dot(dS, S0, P * N);
  Lanes cs[L / kLanes] = {};
  float suffix = 0.f;
  for (int64_t k = L - 1; k >= 0; --k) {
    for (int64_t v = 0; v < L / kLanes; ++v) cs[v] += ld(q + k * L + v * kLanes);
    suffix += dot(U + k * N, Cc + k * N, N);
    dl[k] = sum_below(cs, k) + suffix + whole;
  }
  float prefix = 0.f;
  for (int64_t k = 0; k < L; ++k) {
    const float w = lanes::opaque(W[k] * dot(XdS + k * N, Bc + k * N, N));  // rounded under any -mtune
    dl[k] += prefix;
    prefix += w;
  }
  Lanes dD = ld(dD_.data() + j * kLanes);
  for (int64_t i = steps - 1; i >= 0; --i) {
    const int64_t t = t0 + i;
    const float dt = r.dt[t * r.sdt], Dh = h.D ? *h.D : 0.f;
    const float *__restrict x = r.x + t * r.sx, *__restrict g = dXd + i * P, *__restrict dy = dY + i * P;
    if (h.gr.x) {
      float* __restrict gx = h.gr.x + t * r.sx;
      for (int64_t p = 0; p < P; ++p) gx[p] += dt * g[p] + Dh * dy[p];
    }
    for (int64_t p = 0; p < P; p += kLanes) dD = lanes::fma(ld(dy + p), ld(x + p), dD);
    if (h.gr.dt) h.gr.dt[t * r.sdt] += dot(x, g, P) + h.A * dl[i];
    dA_[size_t(j)] += dt * dl[i];
  }
  st(dD_.data() + j * kLanes, dD);
  for (int64_t k = 0; k < P * N; ++k) dS[k] *= eL;  // dS <- e_L dS + dY^T diag(E) C
  for (int64_t i = 0; i < L; ++i) scaled(Cc + i * N, E[i], N, EC_.data() + i * N);
  tile_gemm(P, N, L, dY, 1, P, EC_.data(), N, dS, N, true);
}

}  // namespace tri::ssd_detail
