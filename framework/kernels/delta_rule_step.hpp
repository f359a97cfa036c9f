// The delta rule's step and what it needs, shared by the fused kernel (delta_rule.cpp) and the
// naive reference and decoding step (delta_rule_step.cpp): the layout's checks, a head's rows in
// [B, T, H, *], and one step of the recurrence in memory and in registers (delta_rule.cpp's header
// has the maths). Internal to framework/kernels.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "framework/core/tensor.hpp"
#include "framework/simd/lanes.hpp"

namespace tri::delta_detail {

using lanes::bcast, lanes::ld, lanes::st, lanes::Lanes, lanes::kLanes;

constexpr int kChains = 4;  // independent accumulators over Dk, to hide the FMA latency

inline int64_t padded(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

struct Dims {
  int64_t B, T, H, Dk, Dv, Dvp;
  bool registers = false;  // the state in registers (fits_registers), else in memory
};

inline std::string shape_text(const Tensor& t) { return t.defined() ? t.shape().str() : "undefined"; }

// Checks q, k [B, T, H, Dk], v [B, T, H, Dv], beta [B, T, H] and g [B, T, H] or undefined.
inline Dims check_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta,
                         const Tensor& g) {
  auto fail = [&](const std::string& why) { return Error(std::string(op) + ": " + why); };
  if (!q.defined() || q.dim() != 4) throw fail("q " + shape_text(q) + " must be [B, T, H, Dk]");
  if (!k.defined() || k.shape() != q.shape())
    throw fail("k " + shape_text(k) + " must have q's shape " + q.shape().str());
  if (!v.defined() || v.dim() != 4 || v.size(0) != q.size(0) || v.size(1) != q.size(1) || v.size(2) != q.size(2))
    throw fail("v " + shape_text(v) + " must be [B, T, H, Dv] with q's B, T, H " + q.shape().str());
  const Shape bth{q.size(0), q.size(1), q.size(2)};
  if (!beta.defined() || beta.shape() != bth)
    throw fail("beta " + shape_text(beta) + " must be " + bth.str());
  if (g.defined() && g.shape() != bth) throw fail("g " + g.shape().str() + " must be " + bth.str() + " or undefined");
  return {q.size(0), q.size(1), q.size(2), q.size(3), v.size(3), padded(v.size(3))};
}

// Rows j of M (Dk x Dvp, columns l0 .. l0 + 15), each given to f(j, chain): kChains chains in
// turn, the rows past the last whole group on chain 0. From row `first` (a multiple of
// kChains), the rows get the chains a walk from row 0 would give them.
template <class F>
inline void over_rows(int64_t Dk, F f, int64_t first = 0) {
  int64_t j = first;
  for (; j + kChains <= Dk; j += kChains)
    for (int c = 0; c < kChains; ++c) f(j + c, c);
  for (; j < Dk; ++j) f(j, 0);
}

// over_rows for a Dk known here, a whole number of chains: row j on chain j mod kChains, as there.
template <int Dk, class F>
inline void over_rows_fixed(F f) {
  static_assert(Dk % kChains == 0);
  for (int j = 0; j < Dk; j += kChains)
    for (int c = 0; c < kChains; ++c) f(j + c, c);
}

inline Lanes combine(const Lanes (&acc)[kChains]) { return (acc[0] + acc[1]) + (acc[2] + acc[3]); }

// One step of the recurrence (the top of the file) from the state `from` to M [Dk][Dvp] (from may
// be M; apart, the backward's recomputation keeps every state without copying one first): vp is
// v_t padded to Dvp with zeros; writes o_t (Dvp) when o is not null and, when u is not null,
// u = (alpha M)^T k_t (Dvp), which backward reads. The forward, the backward's recomputation
// (without o: a third of the step's multiply-adds) and the decoding step all call it.
inline void step_state(const float* from, float* M, int64_t Dk, int64_t Dvp, const float* q, const float* k,
                       const float* vp, float beta, float alpha, bool gated, float scale, float* o, float* u) {
  const Lanes a = bcast(alpha), b = bcast(beta), sc = bcast(scale);
  for (int64_t l0 = 0; l0 < Dvp; l0 += kLanes) {
    Lanes acc[kChains] = {};
    over_rows(Dk, [&](int64_t j, int c) {  // decay, and read the memory at k
      Lanes mj = ld(from + j * Dvp + l0);
      if (gated) {
        mj = a * mj;
        st(M + j * Dvp + l0, mj);
      }
      acc[c] += k[j] * mj;
    });
    const Lanes uu = combine(acc);
    if (u) st(u + l0, uu);
    const Lanes w = b * (ld(vp + l0) - uu);
    const float* decayed = gated ? M : from;
    Lanes oc[kChains] = {};
    over_rows(Dk, [&](int64_t j, int c) {  // write the correction, and read at q
      const Lanes mj = ld(decayed + j * Dvp + l0) + k[j] * w;
      st(M + j * Dvp + l0, mj);
      if (o) oc[c] += q[j] * mj;
    });
    if (o) st(o + l0, sc * combine(oc));
  }
}

// step_state for a head of Dk keys and 16 values (one vector per row of M) with M in registers:
// the same operations in the same order, so the same bits. The forward and the backward's
// recomputation keep the state there for a whole chunk: at Dk 16 the step that loads and stores
// each row twice ran 2.3x slower (docs/ARCHITECTURE.md). Returns o_t; u as in step_state.
template <int Dk>
inline Lanes step_registers(Lanes (&M)[Dk], const float* q, const float* k, Lanes v, float beta, float alpha,
                            bool gated, float scale, Lanes* u) {
  const Lanes a = bcast(alpha), b = bcast(beta);
  Lanes acc[kChains] = {};
  over_rows_fixed<Dk>([&](int64_t j, int c) {
    if (gated) M[j] = a * M[j];
    acc[c] += k[j] * M[j];
  });
  const Lanes uu = combine(acc);
  if (u) *u = uu;
  const Lanes w = b * (v - uu);
  Lanes oc[kChains] = {};
  over_rows_fixed<Dk>([&](int64_t j, int c) {
    M[j] = M[j] + k[j] * w;
    oc[c] += q[j] * M[j];
  });
  return bcast(scale) * combine(oc);
}

// The heads whose state fits in registers: 16 keys, up to 16 values.
constexpr int kRegisterKeys = 16;
inline bool fits_registers(const Dims& d) { return d.Dk == kRegisterKeys && d.Dvp == kLanes; }

// One (batch, head) of the [B, T, H, *] layout: step t's row at base + t * stride.
struct HeadRows {
  const float *q, *k, *v, *beta, *g;  // g null: no decay
  int64_t sk, sv, sb;                 // H Dk, H Dv, H
  int64_t ok, ov, ob;                 // the offsets of the head's first rows
};

inline HeadRows rows_of(const Dims& d, int64_t bh, const float* q, const float* k, const float* v,
                        const float* beta, const float* g) {
  const int64_t b = bh / d.H, h = bh % d.H;
  const int64_t ok = (b * d.T * d.H + h) * d.Dk, ov = (b * d.T * d.H + h) * d.Dv, ob = b * d.T * d.H + h;
  return {q + ok, k + ok, v + ov, beta + ob, g ? g + ob : nullptr, d.H * d.Dk, d.H * d.Dv, d.H, ok, ov, ob};
}

inline float alpha_at(const HeadRows& r, int64_t t) { return r.g ? std::exp(r.g[t * r.sb]) : 1.f; }

// Copies n floats into a row padded with zeros (the padding written once by the caller).
inline void copy_row(const float* src, int64_t n, float* dst) { std::copy(src, src + n, dst); }

// A row of Dv values padded to Dvp with zeros: the row itself when Dv = Dvp, else its copy in
// buf (whose padding the caller zeroed once).
inline const float* padded_row(const Dims& d, const float* row, float* buf) {
  if (d.Dv == d.Dvp) return row;
  copy_row(row, d.Dv, buf);
  return buf;
}

inline const float* v_row(const Dims& d, const HeadRows& r, int64_t t, float* vp) {
  return padded_row(d, r.v + t * r.sv, vp);
}

}  // namespace tri::delta_detail
