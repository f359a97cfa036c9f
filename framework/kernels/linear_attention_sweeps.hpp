// The sweeps of the causal linear-attention kernel (linear_attention.cpp) over one (batch,
// head): the forward, and the backward's forward and reverse sweeps, each taking kSteps time
// steps per pass over its state. The formulas: linear_attention.cpp's header.
#pragma once
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "framework/simd/lanes.hpp"

namespace tri::linear_attention_sweeps {

constexpr int64_t kLanes = lanes::kLanes;  // state rows are padded to whole vectors
constexpr int64_t kChains = 4;  // independent accumulators, to hide the FMA latency

inline int64_t padded(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

struct Dims {
  int64_t B, T, H, Dk, Dv;
};

// M += a b^T, then out = M^T c: M is rows x lanes (row-major, lanes a multiple of kLanes),
// a and c have `rows` entries, b and out `lanes`. Every sweep is one or two of these per time
// step. The reads accumulate in kChains registers per kLanes block (a fixed order: results
// repeat, and the step function reproduces the parallel forward exactly). N consecutive steps
// (a[s], b[s], c[s], out[s]) share one pass over M: each element sees the same operations in
// the same order as N single steps, but M is loaded and stored once per N.
template <int N>
void update_and_read(float* M, int64_t rows, int64_t lanes, const float* const* a,
                     const float* const* b, const float* const* c, float* const* out) {
  using lanes::ld, lanes::st, lanes::Lanes;
  // Local copies: the stores into M go through a type that may alias anything, the pointer
  // arrays included, which would reload them at every row.
  const float *ar[N], *cr[N];
  for (int s = 0; s < N; ++s) ar[s] = a[s], cr[s] = c[s];
  for (int64_t l0 = 0; l0 < lanes; l0 += kLanes) {
    Lanes bl[N], acc[N][kChains] = {};
    for (int s = 0; s < N; ++s) bl[s] = ld(b[s] + l0);
    auto row = [&](int64_t r, int64_t chain) {
      float* m = M + r * lanes + l0;
      Lanes mr = ld(m);
      for (int s = 0; s < N; ++s) {
        mr = mr + ar[s][r] * bl[s];
        acc[s][chain] += cr[s][r] * mr;
      }
      st(m, mr);
    };
    int64_t r = 0;
    for (; r + kChains <= rows; r += kChains)
      for (int64_t u = 0; u < kChains; ++u) row(r + u, u);
    for (; r < rows; ++r) row(r, 0);
    for (int s = 0; s < N; ++s)
      st(out[s] + l0, (acc[s][0] + acc[s][1]) + (acc[s][2] + acc[s][3]));
  }
}

// Time steps per pass over a state: four quarter the state's loads and stores.
constexpr int kSteps = 4;

// One (batch, head) of the [B, T, H, D] layout: row t of each input at base + t * stride.
struct Rows {
  const float *qn, *kn, *v, *qd, *kd;
  int64_t sk, sv;  // H * Dk and H * Dv
};

inline Rows rows_of(const Dims& d, int64_t bh, const float* q, const float* k, const float* v,
                    const float* qd, const float* kd) {
  const int64_t b = bh / d.H, h = bh % d.H;
  const int64_t ok = (b * d.T * d.H + h) * d.Dk, ov = (b * d.T * d.H + h) * d.Dv;
  return {q + ok, k + ok, v + ov, qd + ok, kd + ok, d.H * d.Dk, d.H * d.Dv};
}

// A head's rows are H * D floats apart, short runs the hardware prefetcher follows poorly (at
// H = 4 this halves the speed of long sequences), so the sweeps ask for rows kAhead steps away
// (lanes::prefetch).
constexpr int64_t kAhead = 8;
using lanes::prefetch;

// z += kd, then qd . z: one serial chain of adds, in a fixed order (the committed results carry
// the bits of the compiler's code for this loop, whose products at the ends of rows not a whole
// number of vectors long round differently: the loop is kept as it is).
inline float normaliser(const float* qd, const float* kd, float* z, int64_t n) {
  float dn = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    z[i] += kd[i];
    dn += qd[i] * z[i];
  }
  return dn;
}

// g_t . out_t, likewise.
inline float dot(const float* a, const float* b, int64_t n) {
  float sum = 0.f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// Scratch of forward_head: per step of a block, a value row and a numerator (padded(Dv) each,
// padding zero); a decoding step (T = 1) needs one step's.
inline int64_t forward_work_size(const Dims& d) {
  return std::min<int64_t>(kSteps, d.T) * 2 * padded(d.Dv);
}

// Steps t0 .. t0 + N - 1 of forward_head.
template <int N>
void forward_steps(const Dims& d, const Rows& x, int64_t t0, float* S, float* z, float eps,
                   float* out, float* den, int64_t sden, float* work) {
  const int64_t Dk = d.Dk, Dv = d.Dv, Dvp = padded(Dv);
  const float *a[N], *b[N], *c[N];
  float* num[N];
  for (int s = 0; s < N; ++s) {
    const int64_t t = t0 + s;
    float* vb = work + s * Dvp;
    const float* vt = x.v + t * x.sv;
    for (int64_t j = 0; j < Dv; ++j) vb[j] = vt[j];
    a[s] = x.kn + t * x.sk, b[s] = vb, c[s] = x.qn + t * x.sk;
    num[s] = work + (N + s) * Dvp;
  }
  update_and_read<N>(S, Dk, Dvp, a, b, c, num);
  float dn[N];
  for (int s = 0; s < N; ++s) dn[s] = normaliser(x.qd + (t0 + s) * x.sk, x.kd + (t0 + s) * x.sk, z, Dk);
  for (int s = 0; s < N; ++s) {
    const int64_t t = t0 + s;
    const float dt = dn[s] + eps;
    float* ot = out + t * x.sv;
    for (int64_t j = 0; j < Dv; ++j) ot[j] = num[s][j] / dt;
    den[t * sden] = dt;
  }
}

// d.T steps of one (batch, head) from the state S (Dk x padded(Dv)) and z (Dk): out rows at
// stride x.sv, den_t at stride sden. work: forward_work_size floats, zeroed.
inline void forward_head(const Dims& d, const Rows& x, float* S, float* z, float eps, float* out,
                         float* den, int64_t sden, float* work) {
  int64_t t = 0;
  for (; t + kSteps <= d.T; t += kSteps) {
    // In place, not in a lambda: GCC takes a lambda that only prefetches for a function without
    // effects and drops its calls.
    for (int64_t ta = t + kAhead; ta < std::min(t + kAhead + kSteps, d.T); ++ta) {
      for (const float* p : {x.qn, x.kn, x.qd, x.kd}) prefetch(p + ta * x.sk, d.Dk);
      prefetch(x.v + ta * x.sv, d.Dv);
      prefetch(out + ta * x.sv, d.Dv);
    }
    forward_steps<kSteps>(d, x, t, S, z, eps, out, den, sden, work);
  }
  for (; t < d.T; ++t) forward_steps<1>(d, x, t, S, z, eps, out, den, sden, work);
}

// Gradient destinations of one (batch, head), laid out like Rows; nullptr where none is needed.
// gqd/gkd may alias gq/gk (no separate normaliser features): every write is an addition, and
// each row receives its normaliser term and its numerator term in a fixed order.
struct GradRows {
  float *gq, *gk, *gv, *gqd, *gkd;
};

// The backward's scratch: the states and, per step of a block, its rows (padded, padding zero).
struct BackwardScratch {
  float* ST;  // S^T, Dv x Dkp: d qn_t = S_t gn_t is then a read of update_and_read
  float* R;   // Dk x Dvp
  float* RT;  // R^T, Dv x Dkp, for d kn_s = R_s v_s
  float *z, *r;              // Dk each
  float *kb, *qb, *dq, *dk;  // kSteps x Dkp each: kn_t, qn_t, d qn_t, d kn_t
  float *gn, *dv;            // kSteps x Dvp each: g_t / den_t, d v_t
  float* zs;                 // kSteps x Dk: z after each step
  float* gd;                 // T: d den_t
  std::vector<float> buf;

  explicit BackwardScratch(const Dims& d) {
    const int64_t Dkp = padded(d.Dk), Dvp = padded(d.Dv);
    const std::pair<float**, int64_t> parts[] = {
        {&ST, d.Dv * Dkp},   {&R, d.Dk * Dvp},    {&RT, d.Dv * Dkp},   {&z, d.Dk},
        {&r, d.Dk},          {&kb, kSteps * Dkp}, {&qb, kSteps * Dkp}, {&dq, kSteps * Dkp},
        {&dk, kSteps * Dkp}, {&gn, kSteps * Dvp}, {&dv, kSteps * Dvp}, {&zs, kSteps * d.Dk},
        {&gd, d.T}};
    int64_t n = 0;
    for (const auto& part : parts) n += part.second;
    buf.assign(size_t(n), 0.f);
    float* p = buf.data();
    for (const auto& [dst, size] : parts) *dst = p, p += size;
  }
  void clear() { std::fill(buf.data(), gd, 0.f); }  // gd is written before it is read
};

// A backward sweep's view of one (batch, head): g and out at its first row (stride x.sv), den at
// its first entry (stride d.H).
struct HeadBackward {
  const Dims& d;
  const Rows& x;
  const GradRows& gr;
  const float *g, *out, *den;
  const BackwardScratch& w;

  // gn_t = g_t / den_t into slot s.
  float* load_gn(int s, int64_t t) const {
    const float* gt = g + t * x.sv;
    const float inv = 1.f / den[t * d.H];
    float* gn = w.gn + s * padded(d.Dv);
    for (int64_t j = 0; j < d.Dv; ++j) gn[j] = gt[j] * inv;
    return gn;
  }
  static void add_to(float* dst, const float* src, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
  }
  static const float* copy_to(float* dst, const float* src, int64_t n) {
    std::copy(src, src + n, dst);
    return dst;
  }

  // Forward sweep, steps t0 .. t0 + N - 1: S_t, z_t, d den_t, d qn_t = S_t gn_t,
  // d qd_t = d den_t z_t.
  template <int N>
  void forward_steps(int64_t t0) const {
    const int64_t Dk = d.Dk, Dv = d.Dv, Dkp = padded(Dk);
    for (int s = 0; s < N; ++s) {
      const int64_t t = t0 + s;
      w.gd[t] = -dot(g + t * x.sv, out + t * x.sv, Dv) / den[t * d.H];
      const float* kd = x.kd + t * x.sk;
      float* zs = w.zs + s * Dk;
      for (int64_t i = 0; i < Dk; ++i) zs[i] = w.z[i] += kd[i];
    }
    if (gr.gq) {
      const float *a[N], *b[N], *c[N];
      float* dq[N];
      for (int s = 0; s < N; ++s) {
        const int64_t t = t0 + s;
        a[s] = x.v + t * x.sv, b[s] = copy_to(w.kb + s * Dkp, x.kn + t * x.sk, Dk);
        c[s] = load_gn(s, t), dq[s] = w.dq + s * Dkp;
      }
      update_and_read<N>(w.ST, Dv, Dkp, a, b, c, dq);
      for (int s = 0; s < N; ++s) add_to(gr.gq + (t0 + s) * x.sk, dq[s], Dk);
    }
    if (gr.gqd)
      for (int s = 0; s < N; ++s) {
        float* gqd = gr.gqd + (t0 + s) * x.sk;
        const float* zs = w.zs + s * Dk;
        for (int64_t i = 0; i < Dk; ++i) gqd[i] += w.gd[t0 + s] * zs[i];
      }
  }

  // Reverse sweep, steps t0, t0 - 1, .., t0 - N + 1: R_s, r_s, d kn_s = R_s v_s,
  // d v_s = R_s^T kn_s, d kd_s = r_s.
  template <int N>
  void reverse_steps(int64_t t0) const {
    const int64_t Dk = d.Dk, Dv = d.Dv, Dkp = padded(Dk), Dvp = padded(Dv);
    const float* gn[N];
    for (int s = 0; s < N; ++s) gn[s] = load_gn(s, t0 - s);
    if (gr.gkd)
      for (int s = 0; s < N; ++s) {
        const int64_t t = t0 - s;
        const float* qd = x.qd + t * x.sk;
        float* gkd = gr.gkd + t * x.sk;
        for (int64_t i = 0; i < Dk; ++i) {
          w.r[i] += w.gd[t] * qd[i];
          gkd[i] += w.r[i];
        }
      }
    const float *qn[N], *kn[N], *vt[N];
    for (int s = 0; s < N; ++s)
      qn[s] = x.qn + (t0 - s) * x.sk, kn[s] = x.kn + (t0 - s) * x.sk, vt[s] = x.v + (t0 - s) * x.sv;
    if (gr.gv) {
      float* dv[N];
      for (int s = 0; s < N; ++s) dv[s] = w.dv + s * Dvp;
      update_and_read<N>(w.R, Dk, Dvp, qn, gn, kn, dv);
      for (int s = 0; s < N; ++s) add_to(gr.gv + (t0 - s) * x.sv, dv[s], Dv);
    }
    if (gr.gk) {
      const float* qb[N];
      float* dk[N];
      for (int s = 0; s < N; ++s) qb[s] = copy_to(w.qb + s * Dkp, qn[s], Dk), dk[s] = w.dk + s * Dkp;
      update_and_read<N>(w.RT, Dv, Dkp, gn, qb, vt, dk);
      for (int s = 0; s < N; ++s) add_to(gr.gk + (t0 - s) * x.sk, dk[s], Dk);
    }
  }
};

// The backward of one (batch, head): g and out at this head's first row (stride x.sv), den at
// its first entry (stride d.H).
inline void backward_head(const Dims& d, const Rows& x, const GradRows& gr, const float* g,
                          const float* out, const float* den, BackwardScratch& w) {
  w.clear();
  const HeadBackward hb{d, x, gr, g, out, den, w};
  const int64_t T = d.T, Dk = d.Dk, Dv = d.Dv;
  for (int64_t t = 0; t < T; t += kSteps) {
    for (int64_t ta = t + kAhead; ta < std::min(t + kAhead + kSteps, T); ++ta) {
      for (const float* p : {x.kn, x.kd}) prefetch(p + ta * x.sk, Dk);
      for (const float* p : {x.v, g, out}) prefetch(p + ta * x.sv, Dv);
      for (float* p : {gr.gq, gr.gqd})
        if (p) prefetch(p + ta * x.sk, Dk);
    }
    if (t + kSteps <= T) hb.forward_steps<kSteps>(t);
    else for (int64_t u = t; u < T; ++u) hb.forward_steps<1>(u);
  }
  for (int64_t t = T - 1; t >= 0; t -= kSteps) {
    for (int64_t ta = t - kAhead; ta > std::max(t - kAhead - kSteps, int64_t(-1)); --ta) {
      for (const float* p : {x.qn, x.kn, x.qd}) prefetch(p + ta * x.sk, Dk);
      for (const float* p : {x.v, g}) prefetch(p + ta * x.sv, Dv);
      for (float* p : {gr.gk, gr.gkd})
        if (p) prefetch(p + ta * x.sk, Dk);
      if (gr.gv) prefetch(gr.gv + ta * x.sv, Dv);
    }
    if (t + 1 >= kSteps) hb.reverse_steps<kSteps>(t);
    else for (int64_t u = t; u >= 0; --u) hb.reverse_steps<1>(u);
  }
}

}  // namespace tri::linear_attention_sweeps
