// The SSD scan: the fused kernel, its naive reference and the decoding step (ssd_scan.hpp).
//
// Forward, per (batch, head), one step, row p of the state (N values):
//   a = exp(dt A);   H[p] <- a H[p] + (dt x[p]) B;   y[p] = H[p] . C + D x[p]
// Backward. With dH the gradient w.r.t. the state after step t (from the steps after it; zero
// after the last), H_t and H_{t-1} the states after and before the step:
//   dH[p] += dy[p] C                               the readout
//   dC += sum_p dy[p] H_t[p],   dD += sum_p dy[p] x[p]
//   s[p] = dH[p] . B
//   dB += sum_p dt x[p] dH[p],  dx[p] = dt s[p] + D dy[p]
//   da = sum_p dH[p] . H_{t-1}[p]
//   ddt = sum_p x[p] s[p] + A a da,   dA += dt a da     (a = exp(dt A))
//   dH <- a dH                                     (now w.r.t. H_{t-1})
// The backward reads H_{t-1} and H_t at every step, last step first: the forward saves H every
// kChunk steps, and the backward recomputes a chunk's states from its checkpoint with the
// forward's own step function (step_state: the same bits), then walks them backwards.
// Rows are padded to whole vectors of 16 floats (B and C with zeros, so the padding stays 0).
// Each (batch, head) is one thread's; dB and dC (shared by a group's heads) and dA, dD (shared by
// the batch rows) go to per-head buffers first and are summed in a fixed order afterwards: the
// results repeat bit for bit at any thread count.
#include "framework/kernels/ssd_scan.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/runtime.hpp"
#include "framework/simd/lanes.hpp"

namespace tri {

namespace {

using lanes::bcast, lanes::hsum, lanes::ld, lanes::st, lanes::Lanes, lanes::kLanes;

constexpr int64_t kChunk = 32;  // steps between saved states

inline int64_t padded(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

struct Dims {
  int64_t B, T, H, P, G, N, Np, hg;  // hg: heads per group
};

std::string shape_text(const Tensor& t) { return t.defined() ? t.shape().str() : "undefined"; }

Dims check_inputs(const char* op, const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm,
                  const Tensor& Cm, const Tensor& D) {
  auto fail = [&](const std::string& why) { return Error(std::string(op) + ": " + why); };
  if (!x.defined() || x.dim() != 4) throw fail("x " + shape_text(x) + " must be [B, T, H, P]");
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2);
  const Shape bth{B, T, H};
  if (!dt.defined() || dt.shape() != bth) throw fail("dt " + shape_text(dt) + " must be " + bth.str());
  if (!A.defined() || A.shape() != Shape{H}) throw fail("A " + shape_text(A) + " must be [" + std::to_string(H) + "]");
  if (!Bm.defined() || Bm.dim() != 4 || Bm.size(0) != B || Bm.size(1) != T || Bm.size(2) < 1 || H % Bm.size(2) != 0)
    throw fail("B " + shape_text(Bm) + " must be [B, T, G, N] with x's B, T and G dividing H = " + std::to_string(H));
  if (!Cm.defined() || Cm.shape() != Bm.shape()) throw fail("C " + shape_text(Cm) + " must have B's shape " + Bm.shape().str());
  if (D.defined() && D.shape() != Shape{H})
    throw fail("D " + D.shape().str() + " must be [" + std::to_string(H) + "] or undefined");
  const int64_t G = Bm.size(2), N = Bm.size(3);
  return {B, T, H, x.size(3), G, N, padded(N), H / G};
}

// One step from the state `from` to S [P][Np] (the top of the file; from may be S: the
// backward's recomputation keeps every state without copying one first): Bp, Cp are B_t, C_t
// padded with zeros; writes y (P) when y is not null. D null: no skip term. The forward, the
// backward's recomputation (without y: it needs the states only) and the decoding step all
// call it.
inline void step_state(const float* from, float* S, int64_t P, int64_t Np, const float* x, float dt, float a,
                       const float* Bp, const float* Cp, const float* D, float* y) {
  const Lanes av = bcast(a);
  for (int64_t p = 0; p < P; ++p) {
    const Lanes u = bcast(dt * x[p]);
    Lanes acc = {};
    const float* src = from + p * Np;
    float* row = S + p * Np;
    for (int64_t l0 = 0; l0 < Np; l0 += kLanes) {
      const Lanes h = lanes::fma(av, ld(src + l0), u * ld(Bp + l0));  // the FMAs pinned: the tiles' bits
      st(row + l0, h);
      if (y) acc = lanes::fma(h, ld(Cp + l0), acc);
    }
    if (y) y[p] = D ? std::fma(*D, x[p], hsum(acc)) : hsum(acc);
  }
}

// One (batch, head) of the layout: step t's row at base + t * stride.
struct HeadRows {
  const float *x, *dt, *B, *C;
  int64_t sx, sdt, sbc;  // H P, H, G N
  int64_t ox, odt, obc;  // the offsets of the head's first rows
  int64_t h;
};

HeadRows rows_of(const Dims& d, int64_t bh, const float* x, const float* dt, const float* B, const float* C) {
  const int64_t b = bh / d.H, h = bh % d.H, g = h / d.hg;
  const int64_t ox = (b * d.T * d.H + h) * d.P, odt = b * d.T * d.H + h, obc = (b * d.T * d.G + g) * d.N;
  return {x + ox, dt + odt, B + obc, C + obc, d.H * d.P, d.H, d.G * d.N, ox, odt, obc, h};
}

inline void copy_row(const float* src, int64_t n, float* dst) { std::copy(src, src + n, dst); }

// The forward over one (batch, head): y's rows (out, stride H P) and, when ckpt is not null, the
// state before every kChunk-th step (ckpt + c P Np: S before step c kChunk).
void forward_head(const Dims& d, const HeadRows& r, float A, const float* D, float* S, float* Bp, float* Cp,
                  float* out, float* ckpt) {
  const int64_t n = d.P * d.Np;
  std::fill(S, S + n, 0.f);
  std::fill(Bp, Bp + d.Np, 0.f);
  std::fill(Cp, Cp + d.Np, 0.f);
  for (int64_t t = 0; t < d.T; ++t) {
    if (ckpt && t % kChunk == 0) std::copy(S, S + n, ckpt + (t / kChunk) * n);
    copy_row(r.B + t * r.sbc, d.N, Bp);
    copy_row(r.C + t * r.sbc, d.N, Cp);
    const float dt = r.dt[t * r.sdt];
    step_state(S, S, d.P, d.Np, r.x + t * r.sx, dt, std::exp(dt * A), Bp, Cp, D, out + t * r.sx);
  }
}

// Where one (batch, head)'s gradients go (null: not needed): x and dt at the head's first rows
// (added into), B and C into the head's own [T, N] buffers (written), A and D one float each.
struct GradRows {
  float *x, *dt, *B, *C, *A, *D;
};

struct BackwardScratch {
  std::vector<float> states, dH, Bp, Cp, dB, dC;
  explicit BackwardScratch(const Dims& d)
      : states(size_t((kChunk + 1) * d.P * d.Np)), dH(size_t(d.P * d.Np)), Bp(size_t(d.Np)), Cp(size_t(d.Np)),
        dB(size_t(d.Np)), dC(size_t(d.Np)) {}
};

// One step of the adjoint over the state's rows p (the top of the file): dH <- a (dH + dy_p C),
// and the step's sums: dC and dB over p, da over p and the lanes; tail(p, s) takes the rest of
// row p, s = (dH + dy_p C) . B.
struct AdjointStep {
  int64_t P;
  float* dH;
  const float *Ht, *Hp, *Bp, *Cp, *dy, *x;
  float dt;
  Lanes av;
  float *dB, *dC;
  Lanes* da;
};

// Any width: Np floats per row, B, C, dB and dC read and written through memory.
template <class Tail>
inline void adjoint_rows(const AdjointStep& a, int64_t Np, Tail tail) {
  for (int64_t p = 0; p < a.P; ++p) {
    const Lanes dyp = bcast(a.dy[p]), u = bcast(a.dt * a.x[p]);
    Lanes sp = {};
    for (int64_t l0 = 0; l0 < Np; l0 += kLanes) {
      float* m = a.dH + p * Np + l0;
      const Lanes dh = ld(m) + dyp * ld(a.Cp + l0);
      st(a.dC + l0, ld(a.dC + l0) + dyp * ld(a.Ht + p * Np + l0));
      st(a.dB + l0, ld(a.dB + l0) + u * dh);
      sp += dh * ld(a.Bp + l0);
      *a.da += dh * ld(a.Hp + p * Np + l0);
      st(m, a.av * dh);
    }
    tail(p, hsum(sp));
  }
}

// G vectors per row, known here: B, C, dB and dC live in registers. The same operations in the
// same order as adjoint_rows (dB and dC start at zero there too): the same bits.
template <int G, class Tail>
inline void adjoint_rows_fixed(const AdjointStep& a, Tail tail) {
  constexpr int64_t Np = G * kLanes;
  Lanes b[G], c[G], db[G], dc[G];
  for (int g = 0; g < G; ++g) {
    b[g] = ld(a.Bp + g * kLanes);
    c[g] = ld(a.Cp + g * kLanes);
    db[g] = ld(a.dB + g * kLanes);
    dc[g] = ld(a.dC + g * kLanes);
  }
  Lanes da = *a.da;
  for (int64_t p = 0; p < a.P; ++p) {
    const Lanes dyp = bcast(a.dy[p]), u = bcast(a.dt * a.x[p]);
    Lanes sp = {};
    for (int g = 0; g < G; ++g) {
      float* m = a.dH + p * Np + g * kLanes;
      const Lanes dh = ld(m) + dyp * c[g];
      dc[g] = dc[g] + dyp * ld(a.Ht + p * Np + g * kLanes);
      db[g] = db[g] + u * dh;
      sp += dh * b[g];
      da += dh * ld(a.Hp + p * Np + g * kLanes);
      st(m, a.av * dh);
    }
    tail(p, hsum(sp));
  }
  *a.da = da;
  for (int g = 0; g < G; ++g) {
    st(a.dB + g * kLanes, db[g]);
    st(a.dC + g * kLanes, dc[g]);
  }
}

// Asks for step t's rows of x, d y, B and C, and of their gradients for writing, ahead of their
// use: the backward walks time downwards, which the hardware prefetcher did not follow (as in
// delta_rule.cpp). Inlined always, as lanes::prefetch.
constexpr int64_t kPrefetchSteps = 6;
[[gnu::always_inline]] inline void prefetch_step(const Dims& d, const HeadRows& r, const float* gout,
                                                 const GradRows& gr, int64_t t) {
  for (const float* p : {r.x, gout}) lanes::prefetch(p + t * r.sx, d.P);
  for (const float* p : {r.B, r.C}) lanes::prefetch(p + t * r.sbc, d.N);
  if (gr.x) lanes::prefetch_for_write(gr.x + t * r.sx, d.P);
  for (float* p : {gr.B, gr.C})
    if (p) lanes::prefetch_for_write(p + t * d.N, d.N);
}

// The forward in register tiles, when N is a multiple of 16 and at most 64 (G = N / 16 vectors a
// row). The state's rows are independent (row p evolves by a, dt x[p] and B alone), so a tile of
// R rows walks all T steps with its rows in registers instead of loading and storing the state
// at every step: step_state's operations on each row, in its order, the same bits. The backward
// mixes rows in its per-step sums (dB, dC, da); tiled alike, with the sums passed from tile to
// tile through memory, it ran 1.3x slower (GCC spilled the tile), so it stays row by row.
constexpr int kTileVectors = 16;  // R G vectors of state in registers

template <int G>
inline void load_rows(Lanes (&h)[G], const float* src) {
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) h[g] = ld(src + g * kLanes);
}
template <int G>
inline void store_rows(float* dst, const Lanes (&h)[G]) {
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) st(dst + g * kLanes, h[g]);
}

// step_state's update of one row in registers: h <- a h + u B.
template <int G>
inline void update_row(Lanes (&h)[G], Lanes av, Lanes u, const float* B) {
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) h[g] = lanes::fma(av, h[g], u * ld(B + g * kLanes));
}

// The forward of rows p0 .. p0 + R - 1 of one (batch, head) over all steps (forward_head's).
template <int G, int R>
void forward_tile(const Dims& d, const HeadRows& r, const float* a, int64_t p0, const float* D, float* out,
                  float* ckpt) {
  constexpr int64_t Np = G * kLanes;
  const int64_t n = d.P * Np;
  Lanes h[R][G] = {};
  for (int64_t t = 0; t < d.T; ++t) {
    if (ckpt && t % kChunk == 0)
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) store_rows(ckpt + (t / kChunk) * n + (p0 + i) * Np, h[i]);
    const float *x = r.x + t * r.sx, *B = r.B + t * r.sbc, *C = r.C + t * r.sbc;
    const float dt = r.dt[t * r.sdt];
    const Lanes av = bcast(a[t]);
    float* y = out + t * r.sx;
  #pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const int64_t p = p0 + i;
      update_row(h[i], av, bcast(dt * x[p]), B);
      Lanes acc = {};
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) acc = lanes::fma(h[i][g], ld(C + g * kLanes), acc);
      y[p] = D ? std::fma(*D, x[p], hsum(acc)) : hsum(acc);
    }
  }
}

template <int G>
void forward_head_tiled(const Dims& d, const HeadRows& r, const float* a, const float* D, float* out, float* ckpt) {
  constexpr int R = kTileVectors / G;
  int64_t p0 = 0;
  for (; p0 + R <= d.P; p0 += R) forward_tile<G, R>(d, r, a, p0, D, out, ckpt);
  for (; p0 < d.P; ++p0) forward_tile<G, 1>(d, r, a, p0, D, out, ckpt);
}

// The backward over one (batch, head) (the top of the file).
void backward_head(const Dims& d, const HeadRows& r, float A, const float* D, const float* ckpt, const float* gout,
                   const GradRows& gr, BackwardScratch& s) {
  const int64_t n = d.P * d.Np, P = d.P, Np = d.Np;
  std::fill(s.dH.begin(), s.dH.end(), 0.f);
  std::fill(s.Bp.begin(), s.Bp.end(), 0.f);
  std::fill(s.Cp.begin(), s.Cp.end(), 0.f);
  float* dH = s.dH.data();
  float dA = 0.f, dD = 0.f;
  const int64_t chunks = (d.T + kChunk - 1) / kChunk;
  for (int64_t c = chunks - 1; c >= 0; --c) {
    const int64_t t0 = c * kChunk, t1 = std::min(d.T, t0 + kChunk);
    // The chunk's states, from its checkpoint: states[i + 1] is S after step t0 + i.
    std::copy(ckpt + c * n, ckpt + (c + 1) * n, s.states.data());
    for (int64_t t = t0; t < t1; ++t) {
      float* S = s.states.data() + (t - t0 + 1) * n;
      copy_row(r.B + t * r.sbc, d.N, s.Bp.data());
      copy_row(r.C + t * r.sbc, d.N, s.Cp.data());
      const float dt = r.dt[t * r.sdt];
      step_state(S - n, S, P, Np, r.x + t * r.sx, dt, std::exp(dt * A), s.Bp.data(), s.Cp.data(), D, nullptr);
    }
    for (int64_t t = t1 - 1; t >= t0; --t) {
      if (t >= kPrefetchSteps) prefetch_step(d, r, gout, gr, t - kPrefetchSteps);
      const float* Ht = s.states.data() + (t - t0 + 1) * n;
      const float* Hp = Ht - n;
      const float *x = r.x + t * r.sx, *dy = gout + t * r.sx;
      const float dt = r.dt[t * r.sdt], a = std::exp(dt * A);
      copy_row(r.B + t * r.sbc, d.N, s.Bp.data());
      copy_row(r.C + t * r.sbc, d.N, s.Cp.data());
      std::fill(s.dB.begin(), s.dB.end(), 0.f);
      std::fill(s.dC.begin(), s.dC.end(), 0.f);
      const Lanes av = bcast(a);
      Lanes da = {};
      float ddt = 0.f;
      const AdjointStep step{P, dH, Ht, Hp, s.Bp.data(), s.Cp.data(), dy, x, dt, av, s.dB.data(), s.dC.data(), &da};
      auto tail = [&](int64_t p, float spp) {  // the FMAs GCC chose here, pinned (std::fma)
        if (gr.x) gr.x[t * r.sx + p] += D ? std::fma(*D, dy[p], dt * spp) : dt * spp;
        ddt = std::fma(x[p], spp, ddt);
        dD = std::fma(dy[p], x[p], dD);
      };
      switch (Np / kLanes) {  // N of 16, 32 and 64 (the default) with B, C, dB and dC in registers
        case 1: adjoint_rows_fixed<1>(step, tail); break;
        case 2: adjoint_rows_fixed<2>(step, tail); break;
        case 4: adjoint_rows_fixed<4>(step, tail); break;
        default: adjoint_rows(step, Np, tail);
      }
      const float das = hsum(da) * a;
      if (gr.dt) gr.dt[t * r.sdt] += ddt + A * das;
      dA += dt * das;
      if (gr.B) copy_row(s.dB.data(), d.N, gr.B + t * d.N);
      if (gr.C) copy_row(s.dC.data(), d.N, gr.C + t * d.N);
    }
  }
  if (gr.A) *gr.A = dA;
  if (gr.D) *gr.D = dD;
}

// Vectors per row when the register tiles serve this N (a multiple of 16, at most 64), else 0.
int tiled_vectors(const Dims& d) { return d.N == d.Np && d.Np <= 4 * kLanes ? int(d.Np / kLanes) : 0; }

// a_t = exp(dt_t A) of one (batch, head), as forward_head computes it.
void decays(const Dims& d, const HeadRows& r, float A, std::vector<float>& a) {
  a.resize(size_t(d.T));
  for (int64_t t = 0; t < d.T; ++t) a[size_t(t)] = std::exp(r.dt[t * r.sdt] * A);
}

}  // namespace

void ssd_scan_check(const char* op, const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm,
                    const Tensor& Cm, const Tensor& D) {
  check_inputs(op, x, dt, A, Bm, Cm, D);
}

Tensor ssd_scan(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                const Tensor& D) {
  const Dims d = check_inputs("ssd_scan", x, dt, A, Bm, Cm, D);
  Tensor out = Tensor::empty(x.shape());
  const bool grad = needs_grad({x, dt, A, Bm, Cm, D});
  const int64_t BH = d.B * d.H, per_head = ((d.T + kChunk - 1) / kChunk) * d.P * d.Np;
  Tensor ckpt = grad ? Tensor::empty(Shape{BH, per_head}) : Tensor();
  const float* Dp = D.defined() ? D.data() : nullptr;
#pragma omp parallel if (BH > 1)
  {
    std::vector<float> S(size_t(d.P * d.Np)), Bp(size_t(d.Np)), Cp(size_t(d.Np)), a;
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < BH; ++bh) {
      const HeadRows r = rows_of(d, bh, x.data(), dt.data(), Bm.data(), Cm.data());
      const float* Dh = Dp ? Dp + r.h : nullptr;
      float* ck = grad ? ckpt.data() + bh * per_head : nullptr;
      const int G = tiled_vectors(d);
      if (G) decays(d, r, A.data()[r.h], a);
      switch (G) {
        case 1: forward_head_tiled<1>(d, r, a.data(), Dh, out.data() + r.ox, ck); break;
        case 2: forward_head_tiled<2>(d, r, a.data(), Dh, out.data() + r.ox, ck); break;
        case 3: forward_head_tiled<3>(d, r, a.data(), Dh, out.data() + r.ox, ck); break;
        case 4: forward_head_tiled<4>(d, r, a.data(), Dh, out.data() + r.ox, ck); break;
        default: forward_head(d, r, A.data()[r.h], Dh, S.data(), Bp.data(), Cp.data(), out.data() + r.ox, ck);
      }
    }
  }
  if (!grad) return out;
  std::vector<Tensor> saved = {x, dt, A, Bm, Cm};
  if (D.defined()) saved.push_back(D);
  record("ssd_scan", out, saved, [x, dt, A, Bm, Cm, D, ckpt, d, per_head](const float* gout) {
    const int64_t BH = d.B * d.H;
    float *gx = grad_of(x), *gdt = grad_of(dt), *gA = grad_of(A), *gB = grad_of(Bm), *gC = grad_of(Cm);
    float* gD = D.defined() ? grad_of(D) : nullptr;
    // Per head: dB and dC [T, N], dA and dD one float; summed below in a fixed order.
    std::vector<float> hB(gB ? size_t(BH * d.T * d.N) : 0), hC(gC ? size_t(BH * d.T * d.N) : 0);
    std::vector<float> hA(static_cast<size_t>(BH)), hD(static_cast<size_t>(BH));
    const float* Dp = D.defined() ? D.data() : nullptr;
#pragma omp parallel if (BH > 1)
    {
      lanes::FlushSubnormals ftz;
      BackwardScratch scratch(d);
#pragma omp for schedule(static)
      for (int64_t bh = 0; bh < BH; ++bh) {
        const HeadRows r = rows_of(d, bh, x.data(), dt.data(), Bm.data(), Cm.data());
        const GradRows gh{gx ? gx + r.ox : nullptr,
                          gdt ? gdt + r.odt : nullptr,
                          gB ? hB.data() + bh * d.T * d.N : nullptr,
                          gC ? hC.data() + bh * d.T * d.N : nullptr,
                          hA.data() + bh,
                          hD.data() + bh};
        backward_head(d, r, A.data()[r.h], Dp ? Dp + r.h : nullptr, ckpt.data() + bh * per_head, gout + r.ox, gh,
                      scratch);
      }
      // dB, dC [B, T, G, N]: the group's heads in order.
#pragma omp for schedule(static)
      for (int64_t bt = 0; bt < d.B * d.T; ++bt) {
        const int64_t b = bt / d.T, t = bt % d.T;
        for (int64_t g = 0; g < d.G; ++g)
          for (int which = 0; which < 2; ++which) {
            float* dst = which ? gC : gB;
            if (!dst) continue;
            const std::vector<float>& src = which ? hC : hB;
            float* o = dst + (bt * d.G + g) * d.N;
            for (int64_t j = 0; j < d.hg; ++j) {
              const float* h = src.data() + ((b * d.H + g * d.hg + j) * d.T + t) * d.N;
              for (int64_t i = 0; i < d.N; ++i) o[i] += h[i];
            }
          }
      }
    }
    // dA, dD [H]: the batch rows in order.
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t b = 0; b < d.B; ++b) {
        if (gA) gA[h] += hA[size_t(b * d.H + h)];
        if (gD) gD[h] += hD[size_t(b * d.H + h)];
      }
  });
  return out;
}

Tensor ssd_scan_naive(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                      const Tensor& D) {
  const Dims d = check_inputs("ssd_scan_naive", x, dt, A, Bm, Cm, D);
  const int64_t B = d.B, G = d.G, hg = d.hg, P = d.P, N = d.N;
  // Heads as [G, hg] so that a group's B and C broadcast over its heads; time-major for views.
  const Tensor xt = permute(x, {1, 0, 2, 3}), dtt = permute(dt, {1, 0, 2});
  const Tensor Bt = permute(Bm, {1, 0, 2, 3}), Ct = permute(Cm, {1, 0, 2, 3});
  const Tensor Ah = reshape(A, Shape{1, G, hg, 1, 1});
  Tensor S = Tensor::zeros(Shape{B, G, hg, P, N});
  std::vector<Tensor> outs;
  for (int64_t t = 0; t < d.T; ++t) {
    const Tensor xs = reshape(slice(xt, 0, t, t + 1), Shape{B, G, hg, P, 1});
    const Tensor ds = reshape(slice(dtt, 0, t, t + 1), Shape{B, G, hg, 1, 1});
    const Tensor bs = reshape(slice(Bt, 0, t, t + 1), Shape{B, G, 1, 1, N});
    const Tensor cs = reshape(slice(Ct, 0, t, t + 1), Shape{B, G, 1, 1, N});
    S = add(mul(S, exp(mul(ds, Ah))), mul(mul(ds, xs), bs));  // a H + dt x B^T
    Tensor y = sum(mul(S, cs), {4});                           // H C: [B, G, hg, P]
    if (D.defined()) y = add(y, mul(reshape(xs, Shape{B, G, hg, P}), reshape(D, Shape{1, G, hg, 1})));
    outs.push_back(reshape(y, Shape{1, B, d.H, P}));
  }
  return permute(concat(outs, 0), {1, 0, 2, 3});
}

Tensor ssd_scan_step(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                     const Tensor& D, Tensor& state) {
  const Dims d = check_inputs("ssd_scan_step", x, dt, A, Bm, Cm, D);
  if (d.T != 1)
    throw Error("ssd_scan_step: takes one time step, got T = " + std::to_string(d.T) + " in x " + x.shape().str());
  const Shape s_shape{d.B, d.H, d.P, d.N};
  if (!state.defined() || state.shape() != s_shape)
    throw Error("ssd_scan_step: state " + shape_text(state) + " must be " + s_shape.str());
  Tensor out = Tensor::empty(x.shape());
  const int64_t BH = d.B * d.H, n = d.P * d.N;
  const bool pad = d.N != d.Np;  // the step runs on a padded copy of the state
  const float* Dp = D.defined() ? D.data() : nullptr;
  auto heads = [&] {  // an orphaned `omp for`: inside a parallel region it splits the heads
    std::vector<float> Sp(size_t(pad ? d.P * d.Np : 0)), Bp(size_t(d.Np)), Cp(size_t(d.Np));
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < BH; ++bh) {
      const HeadRows r = rows_of(d, bh, x.data(), dt.data(), Bm.data(), Cm.data());
      float* Sh = state.data() + bh * n;
      float* W = pad ? Sp.data() : Sh;
      if (pad) {
        std::fill(Sp.begin(), Sp.end(), 0.f);
        for (int64_t p = 0; p < d.P; ++p) std::copy(Sh + p * d.N, Sh + (p + 1) * d.N, W + p * d.Np);
      }
      std::fill(Bp.begin(), Bp.end(), 0.f);
      std::fill(Cp.begin(), Cp.end(), 0.f);
      copy_row(r.B, d.N, Bp.data());
      copy_row(r.C, d.N, Cp.data());
      const float dt0 = r.dt[0], A_h = A.data()[r.h];
      step_state(W, W, d.P, d.Np, r.x, dt0, std::exp(dt0 * A_h), Bp.data(), Cp.data(), Dp ? Dp + r.h : nullptr,
                 out.data() + r.ox);
      if (pad)
        for (int64_t p = 0; p < d.P; ++p) std::copy(W + p * d.Np, W + p * d.Np + d.N, Sh + p * d.N);
    }
  };
  parallel_if(BH * n > (1 << 16), heads);
  state.bump_version();
  return out;
}

}  // namespace tri
