// The delta rule: the fused kernel, its naive reference and the decoding step (delta_rule.hpp).
//
// Forward, per (batch, head), on the state M = S^T (Dk x Dv), one step:
//   M <- alpha_t M;   u = M^T k_t;   w = beta_t (v_t - u);   M <- M + k_t w^T;   o_t = scale M^T q_t
// Backward. With dM the gradient w.r.t. the state after step t (from the steps after it; zero
// after the last), P = alpha_t M_{t-1} and M_t, u, w as in the forward:
//   dM += scale q_t do_t^T                    the readout
//   dq_t = scale M_t do_t
//   dw = dM^T k_t,   dk_t = dM w              from M_t = P + k_t w^T
//   dbeta_t = dw . (v_t - u),   dv_t = beta_t dw,   du = -beta_t dw
//   dP = dM + k_t du^T,   dk_t += P du        from u = P^T k_t
//   dg_t = alpha_t <dP, M_{t-1}> = <dP, P>,   dM <- alpha_t dP   (now w.r.t. M_{t-1})
// The backward reads M_{t-1} and M_t at every step, last step first: the forward saves M every
// kChunk steps, and the backward recomputes a chunk's states from its checkpoint with the
// forward's own step function (step_state: the same bits), then walks them backwards.
// Every column of M (one value index) evolves on its own, so M's rows are padded to whole
// vectors of 16 floats and a step is a loop over vector columns. The sums over Dk (u, o, dw)
// accumulate lane-wise in a fixed order and the sums over Dv (dq, dk, dbeta, dg) reduce the lanes
// in a fixed order, and each (batch, head) is one thread's: the results repeat bit for bit at
// any thread count. A head of 16 keys and up to 16 values has M (16 vectors) and dM in registers
// instead of memory (step_registers, adjoint_registers): the same operations in the same order.
#include "framework/kernels/delta_rule.hpp"
#include "framework/kernels/delta_rule_step.hpp"

#include <omp.h>

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

using namespace delta_detail;
using lanes::hsum;

constexpr int64_t kChunk = 64;  // steps between saved states

// One head's forward with M in registers (Dims::registers: fits_registers).
template <int Dk>
void forward_registers(const Dims& d, const HeadRows& r, float scale, float* vp, float* op, float* out, float* ckpt) {
  Lanes M[Dk] = {};
  for (int64_t t = 0; t < d.T; ++t) {
    if (ckpt && t % kChunk == 0)
      for (int j = 0; j < Dk; ++j) st(ckpt + ((t / kChunk) * Dk + j) * kLanes, M[j]);
    const Lanes v = ld(v_row(d, r, t, vp));
    const Lanes o = step_registers<Dk>(M, r.q + t * r.sk, r.k + t * r.sk, v, r.beta[t * r.sb], alpha_at(r, t), r.g,
                                       scale, nullptr);
    if (d.Dv == kLanes) {
      st(out + t * r.sv, o);
    } else {
      st(op, o);
      std::copy(op, op + d.Dv, out + t * r.sv);
    }
  }
}

// The forward over heads [h0, h1) of batch row b: o's rows (out, stride H Dv) and, when ckpt is
// not null, each head's state before every kChunk-th step (ckpt + (bh per_head + c Dk Dvp): M
// before step c kChunk). In memory, the heads walk side by side in time, a state each in Ms:
// step t reads the heads' rows of q, k and v, which share cache lines, at once, instead of each
// head fetching the lines again in a walk of its own (S's forward 1.35x faster,
// docs/ARCHITECTURE.md); each head's arithmetic is its own, so the bits do not change. In
// registers a head walks alone.
void forward_heads(const Dims& d, int64_t b, int64_t h0, int64_t h1, const HeadRows* rows, float scale, float* Ms,
                   float* vp, float* op, float* out, float* ckpt, int64_t per_head) {
  const int64_t n = d.Dk * d.Dvp, heads = h1 - h0;
  std::fill(vp, vp + d.Dvp, 0.f);
  auto ckpt_of = [&](int64_t i) { return ckpt ? ckpt + (b * d.H + h0 + i) * per_head : nullptr; };
  if (d.registers) {
    for (int64_t i = 0; i < heads; ++i)
      forward_registers<kRegisterKeys>(d, rows[i], scale, vp, op, out + rows[i].ov, ckpt_of(i));
    return;
  }
  std::fill(Ms, Ms + heads * n, 0.f);
  for (int64_t t = 0; t < d.T; ++t)
    for (int64_t i = 0; i < heads; ++i) {
      const HeadRows& r = rows[i];
      float* M = Ms + i * n;
      if (ckpt && t % kChunk == 0) std::copy(M, M + n, ckpt_of(i) + (t / kChunk) * n);
      step_state(M, M, d.Dk, d.Dvp, r.q + t * r.sk, r.k + t * r.sk, v_row(d, r, t, vp), r.beta[t * r.sb],
                 alpha_at(r, t), r.g, scale, op, nullptr);
      std::copy(op, op + d.Dv, out + r.ov + t * r.sv);
    }
}

// Where one (batch, head)'s gradients go (null: not needed), at the head's first rows.
// A fresh buffer (grad_for_write) is uninitialised: each of its elements is written once, as
// 0 + the gradient (the bits an add into zeros gives), instead of being read and added to.
struct GradRows {
  float *q, *k, *v, *beta, *g;
  bool q_fresh = false, k_fresh = false, v_fresh = false, beta_fresh = false, g_fresh = false;
};

inline void add_or_set(float* p, bool fresh, float x) { *p = fresh ? 0.f + x : *p + x; }

// add_or_set on a row of n values: p = x scale + p (or + 0 when fresh), rounded once.
inline void add_or_set_row(float* p, bool fresh, const float* x, int64_t n, float scale) {
  if (fresh) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) p[i] = std::fma(x[i], scale, 0.f);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) p[i] = std::fma(x[i], scale, p[i]);
  }
}

// A step's dq, dk and dv in registers (adjoint_registers).
struct StepGrads {
  Lanes dq, dk, dv;
};

// add_or_set_row from a vector: its first n <= kLanes lanes, with the same arithmetic.
inline void add_or_set_lanes(float* p, bool fresh, Lanes x, int64_t n, float scale) {
  if (n < kLanes) {
    alignas(64) float row[kLanes];
    st(row, x);
    return add_or_set_row(p, fresh, row, n, scale);
  }
  st(p, lanes::fma(x, bcast(scale), fresh ? Lanes{} : ld(p)));
}

struct BackwardScratch {
  std::vector<float> states, us, dM, vp, dop, dv, dq, dk;
  explicit BackwardScratch(const Dims& d)
      : states(size_t((kChunk + 1) * d.Dk * d.Dvp)), us(size_t(kChunk * d.Dvp)), dM(size_t(d.Dk * d.Dvp)),
        vp(size_t(d.Dvp)), dop(size_t(d.Dvp)), dv(size_t(d.Dvp)), dq(size_t(d.Dk)),
        dk(size_t(d.Dk)) {}
};

// One step of the backward: M_t, M_{t-1}, the step's inputs (v and d out padded to Dvp), u and
// the scalars.
struct AdjointStep {
  const float *Mt, *Mp, *q, *k, *vp, *u, *dop;
  float alpha, beta, scale;
  bool gated;
};

// Over the rows j of M, f(j, chain, rows), where rows(n, x) adds hsum(x) to sums[n][j] (n < N):
// 16 rows at a time folded in registers (Hsum16Fold) and added as one vector, the rows past the
// last 16 through hsum. Rows go to f in over_rows' order, on its chains.
template <int N, class F>
void over_rows_summed(int64_t Dk, float* const (&sums)[N], F f) {
  const int64_t whole = Dk / kLanes * kLanes;
  for (int64_t j0 = 0; j0 < whole; j0 += kLanes) {
    lanes::Hsum16Fold fold[N];
    over_rows_fixed<kLanes>([&](int64_t i, int c) {
      f(j0 + i, c, [&](int n, Lanes row) { fold[n].add(int(i), row); });
    });
    for (int n = 0; n < N; ++n) st(sums[n] + j0, ld(sums[n] + j0) + fold[n].sum());
  }
  over_rows(
      Dk, [&](int64_t j, int c) { f(j, c, [&](int n, Lanes row) { sums[n][j] += hsum(row); }); }, whole);
}

// The adjoint of one step (the top of the file), for any Dk and Dvp: adds into dM (in memory),
// dbeta and dg, and sets the step's s.dq and s.dk (summed from zero) and s.dv. The sums over a
// row's lanes are folded in registers as the rows come (over_rows_summed): through memory, the
// rows' stores and reloads took the loop's time (the backward at S's shape 1.05x faster).
void adjoint_values(const AdjointStep& a, int64_t Dk, int64_t Dvp, float* dM, BackwardScratch& s, float& dbeta,
                    float& dg) {
  const Lanes al = bcast(a.alpha), b = bcast(a.beta);
  std::fill(s.dq.begin(), s.dq.end(), 0.f);
  std::fill(s.dk.begin(), s.dk.end(), 0.f);
  float* const dq_dk[2] = {s.dq.data(), s.dk.data()};
  float* const dk_only[1] = {s.dk.data()};
  for (int64_t l0 = 0; l0 < Dvp; l0 += kLanes) {
    const Lanes dol = ld(a.dop + l0);
    const Lanes vu = ld(a.vp + l0) - ld(a.u + l0), w = b * vu;
    Lanes dw[kChains] = {};
    over_rows_summed<2>(Dk, dq_dk, [&](int64_t j, int ch, auto rows) {  // the readout; then M_t = P + k w^T
      float* m = dM + j * Dvp + l0;
      const Lanes dmj = lanes::fma(bcast(a.scale * a.q[j]), dol, ld(m));
      st(m, dmj);
      rows(0, lanes::opaque(ld(a.Mt + j * Dvp + l0) * dol));
      rows(1, lanes::opaque(dmj * w));
      dw[ch] = lanes::fma(bcast(a.k[j]), dmj, dw[ch]);
    });
    const Lanes dwl = combine(dw);
    dbeta += hsum(lanes::opaque(dwl * vu));
    st(s.dv.data() + l0, b * dwl);
    const Lanes du = -(b * dwl);
    Lanes dga = {};
    over_rows_summed<1>(Dk, dk_only, [&](int64_t j, int, auto rows) {  // u = P^T k; P = alpha M_{t-1}
      float* m = dM + j * Dvp + l0;
      const Lanes dp = lanes::fma(bcast(a.k[j]), du, ld(m));
      const Lanes p = a.gated ? al * ld(a.Mp + j * Dvp + l0) : ld(a.Mp + j * Dvp + l0);
      rows(0, lanes::opaque(p * du));
      if (a.gated) {
        dga = lanes::fma(dp, p, dga);
        st(m, al * dp);
      } else {
        st(m, dp);
      }
    });
    if (a.gated) dg += hsum(lanes::opaque(dga));
  }
}

// adjoint_values with dM in registers (Dims::registers: fits_registers): the same operations in
// the same order, so the same bits (the products rounded first, as there; the sums into dq and
// dk start from zero there too). Hsum16Fold's 8 vectors beside dM's 16 do not spill (the adjoint
// 1.2x faster at E64 than with the 16 rows kept whole). The step's
// gradients stay in registers too (out): written to memory and read back at once, as the
// general loop's are, each waited on the store.
template <int Dk>
void adjoint_registers(const AdjointStep& a, Lanes (&dM)[Dk], StepGrads& out, float& dbeta, float& dg) {
  static_assert(Dk == kLanes, "hsum16 sums 16 rows");
  const Lanes al = bcast(a.alpha), b = bcast(a.beta), dol = ld(a.dop);
  const Lanes vu = ld(a.vp) - ld(a.u), w = b * vu;
  Lanes dw[kChains] = {};
  lanes::Hsum16Fold fold;
  over_rows_fixed<Dk>([&](int64_t j, int ch) {  // the readout; then M_t = P + k w^T
    dM[j] = lanes::fma(bcast(a.scale * a.q[j]), dol, dM[j]);
    fold.add(int(j), lanes::opaque(ld(a.Mt + j * kLanes) * dol));
    dw[ch] = lanes::fma(bcast(a.k[j]), dM[j], dw[ch]);
  });
  out.dq = Lanes{} + fold.sum();
  over_rows_fixed<Dk>([&](int64_t j, int) { fold.add(int(j), lanes::opaque(dM[j] * w)); });
  const Lanes dk = Lanes{} + fold.sum();
  const Lanes dwl = combine(dw);
  dbeta += hsum(lanes::opaque(dwl * vu));
  out.dv = b * dwl;
  const Lanes du = -(b * dwl);
  Lanes dga = {};
  over_rows_fixed<Dk>([&](int64_t j, int) {  // u = P^T k; P = alpha M_{t-1}
    const Lanes dp = lanes::fma(bcast(a.k[j]), du, dM[j]);
    const Lanes p = a.gated ? al * ld(a.Mp + j * kLanes) : ld(a.Mp + j * kLanes);
    fold.add(int(j), lanes::opaque(p * du));
    if (a.gated) {
      dga = lanes::fma(dp, p, dga);
      dM[j] = al * dp;
    } else {
      dM[j] = dp;
    }
  });
  out.dk = dk + fold.sum();
  if (a.gated) dg += hsum(lanes::opaque(dga));
}

// A chunk's states from its checkpoint (already in states[0]): states[i + 1] is M after step t0 +
// i, us[i] the step's u.
template <bool Registers>
void recompute_chunk(const Dims& d, const HeadRows& r, float scale, int64_t t0, int64_t t1, BackwardScratch& s) {
  const int64_t n = d.Dk * d.Dvp;
  if constexpr (Registers) {
    constexpr int Dk = kRegisterKeys;
    Lanes M[Dk];
    for (int j = 0; j < Dk; ++j) M[j] = ld(s.states.data() + j * kLanes);
    for (int64_t t = t0; t < t1; ++t) {
      Lanes u;
      step_registers<Dk>(M, r.q + t * r.sk, r.k + t * r.sk, ld(v_row(d, r, t, s.vp.data())), r.beta[t * r.sb],
                         alpha_at(r, t), r.g, scale, &u);
      st(s.us.data() + (t - t0) * kLanes, u);
      for (int j = 0; j < Dk; ++j) st(s.states.data() + (t - t0 + 1) * n + j * kLanes, M[j]);
    }
    return;
  }
  for (int64_t t = t0; t < t1; ++t) {
    float* M = s.states.data() + (t - t0 + 1) * n;
    step_state(M - n, M, d.Dk, d.Dvp, r.q + t * r.sk, r.k + t * r.sk, v_row(d, r, t, s.vp.data()), r.beta[t * r.sb],
               alpha_at(r, t), r.g, scale, nullptr, s.us.data() + (t - t0) * d.Dvp);
  }
}

// Asks for step t's rows of the inputs, and of the gradients for writing, ahead of their use:
// the backward walks time downwards, which the hardware prefetcher did not follow (the kernel's
// backward at S's shape 1.15x faster, docs/ARCHITECTURE.md). Inlined always, as lanes::prefetch.
constexpr int64_t kPrefetchSteps = 6;
[[gnu::always_inline]] inline void prefetch_step(const HeadRows& r, const float* gout, const GradRows& gr, int64_t Dk,
                                                 int64_t Dv, int64_t t) {
  for (const float* p : {r.q, r.k}) lanes::prefetch(p + t * r.sk, Dk);
  for (const float* p : {r.v, gout}) lanes::prefetch(p + t * r.sv, Dv);
  for (float* p : {gr.q, gr.k})
    if (p) lanes::prefetch_for_write(p + t * r.sk, Dk);
  if (gr.v) lanes::prefetch_for_write(gr.v + t * r.sv, Dv);
}

// The backward over one (batch, head) (the top of the file), adding into the non-null gradients;
// Registers: d.registers. Each form is a function of its own, so that neither's registers are
// allocated around the other's code (the register form's backward at E64 1.1x faster alone).
template <bool Registers>
void backward_head(const Dims& d, const HeadRows& r, float scale, const float* ckpt, const float* gout,
                   const GradRows& gr, BackwardScratch& s) {
  const int64_t n = d.Dk * d.Dvp, Dk = d.Dk, Dvp = d.Dvp;
  std::fill(s.dM.begin(), s.dM.end(), 0.f);
  std::fill(s.vp.begin(), s.vp.end(), 0.f);
  std::fill(s.dop.begin(), s.dop.end(), 0.f);
  Lanes dM[kRegisterKeys] = {};  // dM in registers, when the head's state fits
  const int64_t chunks = (d.T + kChunk - 1) / kChunk;
  for (int64_t c = chunks - 1; c >= 0; --c) {
    const int64_t t0 = c * kChunk, t1 = std::min(d.T, t0 + kChunk);
    std::copy(ckpt + c * n, ckpt + (c + 1) * n, s.states.data());
    recompute_chunk<Registers>(d, r, scale, t0, t1, s);
    for (int64_t t = t1 - 1; t >= t0; --t) {
      if (t >= kPrefetchSteps) prefetch_step(r, gout, gr, Dk, d.Dv, t - kPrefetchSteps);
      const float* Mt = s.states.data() + (t - t0 + 1) * n;
      const AdjointStep a{Mt, Mt - n, r.q + t * r.sk, r.k + t * r.sk, v_row(d, r, t, s.vp.data()),
                          s.us.data() + (t - t0) * Dvp, padded_row(d, gout + t * r.sv, s.dop.data()), alpha_at(r, t),
                          r.beta[t * r.sb], scale, r.g != nullptr};
      float dbeta = 0.f, dg = 0.f;
      if constexpr (Registers) {
        StepGrads sg;
        adjoint_registers<kRegisterKeys>(a, dM, sg, dbeta, dg);
        if (gr.q) add_or_set_lanes(gr.q + t * r.sk, gr.q_fresh, sg.dq, Dk, scale);
        if (gr.k) add_or_set_lanes(gr.k + t * r.sk, gr.k_fresh, sg.dk, Dk, 1.f);
        if (gr.v) add_or_set_lanes(gr.v + t * r.sv, gr.v_fresh, sg.dv, d.Dv, 1.f);
      } else {
        adjoint_values(a, Dk, Dvp, s.dM.data(), s, dbeta, dg);
        if (gr.q) add_or_set_row(gr.q + t * r.sk, gr.q_fresh, s.dq.data(), Dk, scale);
        if (gr.k) add_or_set_row(gr.k + t * r.sk, gr.k_fresh, s.dk.data(), Dk, 1.f);
        if (gr.v) add_or_set_row(gr.v + t * r.sv, gr.v_fresh, s.dv.data(), d.Dv, 1.f);
      }
      if (gr.beta) add_or_set(gr.beta + t * r.sb, gr.beta_fresh, dbeta);
      if (gr.g) add_or_set(gr.g + t * r.sb, gr.g_fresh, dg);
    }
  }
}

void forward_all(const Dims& d, const float* q, const float* k, const float* v, const float* beta, const float* g,
                 float scale, float* out, float* ckpt) {
  const int64_t per_head = ((d.T + kChunk - 1) / kChunk) * d.Dk * d.Dvp;
  // A batch row's heads together, unless that leaves a thread without work.
  const int64_t per_item = d.B >= omp_get_max_threads() ? d.H : 1, items = d.B * d.H / per_item;
#pragma omp parallel if (items > 1)
  {
    std::vector<float> Ms(size_t(per_item * d.Dk * d.Dvp)), vp(size_t(d.Dvp)), op(size_t(d.Dvp));
    std::vector<HeadRows> rows(static_cast<size_t>(per_item));
#pragma omp for schedule(static)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t b = item * per_item / d.H, h0 = item * per_item % d.H;
      for (int64_t i = 0; i < per_item; ++i) rows[size_t(i)] = rows_of(d, b * d.H + h0 + i, q, k, v, beta, g);
      forward_heads(d, b, h0, h0 + per_item, rows.data(), scale, Ms.data(), vp.data(), op.data(), out, ckpt,
                    per_head);
    }
  }
}

void backward_all(const Dims& d, const float* q, const float* k, const float* v, const float* beta, const float* g,
                  float scale, const float* ckpt, const float* gout, const GradRows& gr) {
  const int64_t BH = d.B * d.H, per_head = ((d.T + kChunk - 1) / kChunk) * d.Dk * d.Dvp;
#pragma omp parallel if (BH > 1)
  {
    BackwardScratch scratch(d);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < BH; ++bh) {
      const HeadRows r = rows_of(d, bh, q, k, v, beta, g);
      auto at = [](float* p, int64_t o) { return p ? p + o : nullptr; };
      GradRows gh = gr;
      gh.q = at(gr.q, r.ok), gh.k = at(gr.k, r.ok), gh.v = at(gr.v, r.ov), gh.beta = at(gr.beta, r.ob);
      gh.g = at(gr.g, r.ob);
      if (d.registers)
        backward_head<true>(d, r, scale, ckpt + bh * per_head, gout + r.ov, gh, scratch);
      else
        backward_head<false>(d, r, scale, ckpt + bh * per_head, gout + r.ov, gh, scratch);
    }
  }
}

}  // namespace

void delta_rule_check(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta,
                      const Tensor& g) {
  check_inputs(op, q, k, v, beta, g);
}

Tensor delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta, const Tensor& g,
                  float scale, bool registers) {
  Dims d = check_inputs("delta_rule", q, k, v, beta, g);
  d.registers = registers && fits_registers(d);
  Tensor out = Tensor::empty(Shape{d.B, d.T, d.H, d.Dv});
  const bool grad = needs_grad({q, k, v, beta, g});
  const int64_t chunks = (d.T + kChunk - 1) / kChunk;
  Tensor ckpt = grad ? Tensor::empty(Shape{d.B * d.H, chunks, d.Dk * d.Dvp}) : Tensor();
  forward_all(d, q.data(), k.data(), v.data(), beta.data(), g.defined() ? g.data() : nullptr, scale, out.data(),
              grad ? ckpt.data() : nullptr);
  if (!grad) return out;
  std::vector<Tensor> saved = {q, k, v, beta};
  if (g.defined()) saved.push_back(g);
  record("delta_rule", out, saved, [q, k, v, beta, g, ckpt, d, scale](const float* gout) {
    GradRows gr;
    gr.q = grad_for_write(q, &gr.q_fresh);
    gr.k = grad_for_write(k, &gr.k_fresh);
    gr.v = grad_for_write(v, &gr.v_fresh);
    gr.beta = grad_for_write(beta, &gr.beta_fresh);
    gr.g = g.defined() ? grad_for_write(g, &gr.g_fresh) : nullptr;
    backward_all(d, q.data(), k.data(), v.data(), beta.data(), g.defined() ? g.data() : nullptr, scale,
                 ckpt.data(), gout, gr);
  });
  return out;
}

}  // namespace tri
