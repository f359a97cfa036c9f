// The SSD scan's fused kernel (ssd_scan.hpp); its rows and step in ssd_rows.hpp, the naive
// reference in ssd_scan_naive.cpp, the decoding step in ssd_scan_step.cpp, the backward in chunks
// (for P and N in whole vectors) in ssd_scan_chunks.cpp. Below: the forward and the recurrent
// backward.
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
// Each (batch, head) is one thread's. dB and dC, shared by a group's heads, sum them in order:
// added head by head when one thread takes a (batch, group)'s heads in turn, else from per-head
// buffers afterwards. dA and dD, shared by the batch rows, go to per-head floats first and are
// summed in a fixed order afterwards: the results repeat bit for bit at any thread count.
#include "framework/kernels/ssd_scan.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/kernels/ssd_rows.hpp"
#include "framework/runtime/runtime.hpp"
#include "framework/simd/lanes.hpp"

namespace tri {

namespace {

using namespace ssd_detail;

// The forward over one (batch, head), row by row (a: its decays, decays()): y's rows (out, stride
// H P) and, when ckpt is not null, the state before every kChunk-th step (ckpt + c P Np: S before
// step c kChunk).
void forward_head(const Dims& d, const HeadRows& r, const float* a, const float* D, float* S, float* Bp, float* Cp,
                  float* out, float* ckpt) {
  const int64_t n = d.P * d.Np;
  std::fill(S, S + n, 0.f);
  std::fill(Bp, Bp + d.Np, 0.f);
  std::fill(Cp, Cp + d.Np, 0.f);
  for (int64_t t = 0; t < d.T; ++t) {
    if (ckpt && t % kChunk == 0) std::copy(S, S + n, ckpt + (t / kChunk) * n);
    copy_row(r.B + t * r.sbc, d.N, Bp);
    copy_row(r.C + t * r.sbc, d.N, Cp);
    step_state(S, S, d.P, d.Np, r.x + t * r.sx, r.dt[t * r.sdt], a[t], Bp, Cp, D, out + t * r.sx);
  }
}

struct BackwardScratch {
  std::vector<float> states, dH, Bp, Cp, dB, dC, a;
  explicit BackwardScratch(const Dims& d)
      : states(size_t((kChunk + 1) * d.P * d.Np)), dH(size_t(d.P * d.Np)), Bp(size_t(d.Np)), Cp(size_t(d.Np)),
        dB(size_t(d.Np)), dC(size_t(d.Np)), a(size_t(d.T)) {}
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
    if (p) lanes::prefetch_for_write(p + t * gr.sBC, d.N);
}

// The forward in register tiles, when N is a multiple of 16 and at most 64 (G = N / 16 vectors a
// row). The state's rows are independent (row p evolves by a, dt x[p] and B alone), so a tile of
// R rows walks all T steps with its rows in registers instead of loading and storing the state
// at every step: step_state's operations on each row, in its order, the same bits. The
// backward's recomputation runs in the same tiles. Its adjoint mixes rows in its per-step sums
// (dB, dC, da); tiled alike, with the sums passed from tile to tile through memory, it ran 1.2-2x
// slower (GCC spilled the tile, and each tile-step's prefetches and sums cost more than the L2
// reads saved), so it stays row by row.
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
  constexpr bool kFolded = R == 4 || R == 8 || R == 16;  // the rows' sums folded together (hsum_pairs)
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
    Lanes even{}, pairs[kFolded ? R / 2 : 1];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const int64_t p = p0 + i;
      update_row(h[i], av, bcast(dt * x[p]), B);
      Lanes acc = {};
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) acc = lanes::fma(h[i][g], ld(C + g * kLanes), acc);
      if constexpr (!kFolded)
        y[p] = D ? std::fma(*D, x[p], hsum(acc)) : hsum(acc);
      else if (i % 2 == 0)
        even = acc;
      else
        pairs[i / 2] = lanes::hsum16_pair(even, acc);
    }
    if constexpr (kFolded) {
      const Lanes sums = lanes::hsum_pairs<R>(pairs);
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) y[p0 + i] = D ? std::fma(*D, x[p0 + i], sums[i]) : sums[i];
    }
  }
}

// The backward's recomputation of a chunk [t0, t1) in the forward's register tiles: states[i + 1]
// (rows p0 .. p0 + R - 1) is the state after step t0 + i, from the checkpoint in states[0].
template <int G, int R>
void recompute_tile(const Dims& d, const HeadRows& r, const float* a, int64_t p0, int64_t t0, int64_t t1,
                    float* states) {
  constexpr int64_t Np = G * kLanes;
  const int64_t n = d.P * Np;
  Lanes h[R][G];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) load_rows(h[i], states + (p0 + i) * Np);
  for (int64_t t = t0; t < t1; ++t) {
    const float *x = r.x + t * r.sx, *B = r.B + t * r.sbc;
    const float dt = r.dt[t * r.sdt];
    const Lanes av = bcast(a[t]);
    float* S = states + (t - t0 + 1) * n;
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      update_row(h[i], av, bcast(dt * x[p0 + i]), B);
      store_rows(S + (p0 + i) * Np, h[i]);
    }
  }
}

// When the register tiles serve this N (a multiple of 16, at most 64): calls f(g, R, p0) for each
// tile of R = 16 / G rows from row p0, then for the rows left over one at a time (R = 1), g and R
// as std::integral_constant, and returns true. Otherwise returns false.
template <class F>
bool over_tiles(const Dims& d, F f) {
  auto rows = [&](auto g) {
    constexpr int R = kTileVectors / decltype(g)::value;
    int64_t p0 = 0;
    for (; p0 + R <= d.P; p0 += R) f(g, std::integral_constant<int, R>{}, p0);
    for (; p0 < d.P; ++p0) f(g, std::integral_constant<int, 1>{}, p0);
  };
  if (d.N != d.Np) return false;
  switch (d.Np / kLanes) {
    case 1: rows(std::integral_constant<int, 1>{}); return true;
    case 2: rows(std::integral_constant<int, 2>{}); return true;
    case 3: rows(std::integral_constant<int, 3>{}); return true;
    case 4: rows(std::integral_constant<int, 4>{}); return true;
    default: return false;
  }
}

// a_t = exp(dt_t A) of one (batch, head) into a[0, T), every pass's decays.
void decays(const Dims& d, const HeadRows& r, float A, float* a) {
  for (int64_t t = 0; t < d.T; ++t) a[t] = std::exp(r.dt[t * r.sdt] * A);
}

// The backward over one (batch, head) (the top of the file); a: its decays (decays()).
void backward_head(const Dims& d, const HeadRows& r, float A, const float* a, const float* D, const float* ckpt,
                   const float* gout, const GradRows& gr, BackwardScratch& s) {
  const int64_t n = d.P * d.Np, P = d.P, Np = d.Np;
  // Step t's B and C rows: in place when N fills whole vectors, else padded copies.
  auto row = [&](const float* src, std::vector<float>& buf) {
    if (d.N == Np) return src;
    copy_row(src, d.N, buf.data());
    return static_cast<const float*>(buf.data());
  };
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
    const bool tiled = over_tiles(d, [&](auto g, auto R, int64_t p0) {
      recompute_tile<decltype(g)::value, decltype(R)::value>(d, r, a, p0, t0, t1, s.states.data());
    });
    for (int64_t t = t0; t < t1 && !tiled; ++t) {
      float* S = s.states.data() + (t - t0 + 1) * n;
      step_state(S - n, S, P, Np, r.x + t * r.sx, r.dt[t * r.sdt], a[t], row(r.B + t * r.sbc, s.Bp), nullptr, D,
                 nullptr);
    }
    for (int64_t t = t1 - 1; t >= t0; --t) {
      if (t >= kPrefetchSteps) prefetch_step(d, r, gout, gr, t - kPrefetchSteps);
      const float* Ht = s.states.data() + (t - t0 + 1) * n;
      const float* Hp = Ht - n;
      const float *x = r.x + t * r.sx, *dy = gout + t * r.sx;
      const float dt = r.dt[t * r.sdt];
      std::fill(s.dB.begin(), s.dB.end(), 0.f);
      std::fill(s.dC.begin(), s.dC.end(), 0.f);
      const Lanes av = bcast(a[t]);
      Lanes da = {};
      float ddt = 0.f;
      const AdjointStep step{P,  dH, Ht, Hp, row(r.B + t * r.sbc, s.Bp), row(r.C + t * r.sbc, s.Cp), dy, x, dt, av,
                             s.dB.data(), s.dC.data(), &da};
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
      const float das = hsum(da) * a[t];
      if (gr.dt) gr.dt[t * r.sdt] += ddt + A * das;
      dA += dt * das;
      for (auto [dst, src] : {std::pair{gr.B, s.dB.data()}, std::pair{gr.C, s.dC.data()}}) {
        if (!dst) continue;
        float* o = dst + t * gr.sBC;
        if (gr.add_BC)
          for (int64_t i = 0; i < d.N; ++i) o[i] += src[i];
        else
          copy_row(src, d.N, o);
      }
    }
  }
  if (gr.A) *gr.A = dA;
  if (gr.D) *gr.D = dD;
}

bool recurrent_backward = false;  // RecurrentSsdBackward

}  // namespace

RecurrentSsdBackward::RecurrentSsdBackward() { recurrent_backward = true; }
RecurrentSsdBackward::~RecurrentSsdBackward() { recurrent_backward = false; }

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
    std::vector<float> S(size_t(d.P * d.Np)), Bp(size_t(d.Np)), Cp(size_t(d.Np)), a(size_t(d.T));
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < BH; ++bh) {
      const HeadRows r = rows_of(d, bh, x.data(), dt.data(), Bm.data(), Cm.data());
      const float* Dh = Dp ? Dp + r.h : nullptr;
      float* ck = grad ? ckpt.data() + bh * per_head : nullptr;
      decays(d, r, A.data()[r.h], a.data());
      const bool tiled = over_tiles(d, [&](auto g, auto R, int64_t p0) {
        forward_tile<decltype(g)::value, decltype(R)::value>(d, r, a.data(), p0, Dh, out.data() + r.ox, ck);
      });
      if (!tiled) forward_head(d, r, a.data(), Dh, S.data(), Bp.data(), Cp.data(), out.data() + r.ox, ck);
    }
  }
  if (!grad) return out;
  std::vector<Tensor> saved = {x, dt, A, Bm, Cm};
  if (D.defined()) saved.push_back(D);
  record("ssd_scan", out, saved, [x, dt, A, Bm, Cm, D, ckpt, d, per_head](const float* gout) {
    const int64_t BH = d.B * d.H;
    float *gx = grad_of(x), *gdt = grad_of(dt), *gA = grad_of(A), *gB = grad_of(Bm), *gC = grad_of(Cm);
    float* gD = D.defined() ? grad_of(D) : nullptr;
    // dB and dC [B, T, G, N] sum a group's heads in order. With enough (batch, group) pairs to
    // share out, a thread takes a pair's heads in turn and adds each into them; otherwise the
    // heads run apart into their own [T, N] buffers, summed in that order afterwards. dA and dD:
    // one float per head, summed below.
    // The backward in chunks takes a group's heads together (they share B, C and C B^T), always.
    const bool chunked = ChunkedBackward::serves(d) && !recurrent_backward;
    const bool by_group = chunked || d.B * d.G >= 2 * omp_get_max_threads();
    const bool buffered = !by_group && (gB || gC);
    std::vector<float> hB(buffered && gB ? size_t(BH * d.T * d.N) : 0), hC(buffered && gC ? size_t(BH * d.T * d.N) : 0);
    std::vector<float> hA(static_cast<size_t>(BH)), hD(static_cast<size_t>(BH));
    const float* Dp = D.defined() ? D.data() : nullptr;
    auto grads_of = [&](const HeadRows& r, int64_t bh) {
      GradRows gh{gx ? gx + r.ox : nullptr, gdt ? gdt + r.odt : nullptr, nullptr, nullptr, hA.data() + bh,
                  hD.data() + bh, d.N, false};
      if (by_group) {
        gh.B = gB ? gB + r.obc : nullptr;
        gh.C = gC ? gC + r.obc : nullptr;
        gh.sBC = r.sbc;
        gh.add_BC = true;
      } else {
        gh.B = gB ? hB.data() + bh * d.T * d.N : nullptr;
        gh.C = gC ? hC.data() + bh * d.T * d.N : nullptr;
      }
      return gh;
    };
    auto head = [&](int64_t bh, BackwardScratch& scratch) {
      const HeadRows r = rows_of(d, bh, x.data(), dt.data(), Bm.data(), Cm.data());
      decays(d, r, A.data()[r.h], scratch.a.data());
      backward_head(d, r, A.data()[r.h], scratch.a.data(), Dp ? Dp + r.h : nullptr, ckpt.data() + bh * per_head,
                    gout + r.ox, grads_of(r, bh), scratch);
    };
    // The hg heads of (batch, group) bg in chunks; decays: hg rows of T.
    auto group = [&](int64_t bg, ChunkedBackward& chunks, std::vector<ChunkHead>& heads, std::vector<float>& a) {
      for (int64_t j = 0; j < d.hg; ++j) {
        const int64_t bh = (bg / d.G) * d.H + (bg % d.G) * d.hg + j;
        const HeadRows r = rows_of(d, bh, x.data(), dt.data(), Bm.data(), Cm.data());
        decays(d, r, A.data()[r.h], a.data() + j * d.T);
        heads[size_t(j)] = {r, A.data()[r.h], a.data() + j * d.T, Dp ? Dp + r.h : nullptr, ckpt.data() + bh * per_head,
                            gout + r.ox, grads_of(r, bh)};
      }
      chunks.group(heads.data());
    };
#pragma omp parallel if (BH > 1)
    {
      lanes::FlushSubnormals ftz;
      std::unique_ptr<BackwardScratch> scratch = chunked ? nullptr : std::make_unique<BackwardScratch>(d);
      if (chunked) {
        ChunkedBackward chunks(d);
        std::vector<ChunkHead> heads(size_t(d.hg));
        std::vector<float> a(size_t(d.hg * d.T));
#pragma omp for schedule(static)
        for (int64_t bg = 0; bg < d.B * d.G; ++bg) group(bg, chunks, heads, a);
      } else if (by_group) {
#pragma omp for schedule(static)
        for (int64_t bg = 0; bg < d.B * d.G; ++bg)
          for (int64_t j = 0; j < d.hg; ++j) head((bg / d.G) * d.H + (bg % d.G) * d.hg + j, *scratch);
      } else {
#pragma omp for schedule(static)
        for (int64_t bh = 0; bh < BH; ++bh) head(bh, *scratch);
      }
      if (buffered) {  // dB, dC [B, T, G, N]: the group's heads in order.
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

}  // namespace tri
