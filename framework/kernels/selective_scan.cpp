// The fused selective scan (forward and backward); its naive reference is in
// selective_scan_naive.cpp, the recurrent step in selective_scan_step.cpp. Shapes: B batch,
// T time, E channels, N state size (see selective_scan.hpp).
//
// Layout of the fused kernel: channels are taken kLanes (16) at a time, one vector lane per
// channel, and the state of a block is h[N][kLanes]: for each state index n one vector, so
// every operation of the recurrence is a 16-wide vector op with B_t[n], C_t[n] broadcast (or,
// time-invariant, a per-channel vector). Nothing crosses lanes in the forward pass.
// The forward saves the state of every block every kChunk steps. The backward walks the
// chunks in reverse: it recomputes a chunk's states from its checkpoint into a small buffer,
// then runs the adjoint recurrence dh_t = C_t dy_t + exp(dt_{t+1} A) dh_{t+1} over it.
// Gradients that sum over channels (selective dB, dC) are first summed lane-wise over the
// blocks of a group and reduced across lanes once per group; gradients that sum over batch
// (dA, dD, d delta_bias, time-invariant dB, dC) go to per-batch partials. All partials are
// combined in a fixed order, so results are bit-identical at any thread count.
#include "framework/kernels/selective_scan.hpp"
#include "framework/kernels/scan_args.hpp"
#include "framework/kernels/scan_lanes.hpp"
#include "framework/simd/vec_math.hpp"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/runtime.hpp"

namespace tri {

namespace {

using namespace scan_lanes;
using namespace scan_detail;

constexpr int64_t kChunk = 64;   // steps between saved states
constexpr int64_t kMaxGroup = 8; // blocks per backward work item (their dB, dC sum lane-wise)
constexpr int64_t kStage = 8;    // forward: steps whose inputs are prepared together

// ---- one block of kLanes channels --------------------------------------------------------

// A block's per-channel parameters, transposed to [N][kLanes] so that state n reads one
// vector. Lanes past E are zero (and so are their states: their dt * u is zero).
struct BlockParams {
  int64_t e0 = 0;
  int lanes = 0;
  const float *A, *A2, *B, *C;  // [N][kLanes]: A, A log2(e) (see decay_of); B, C only when time-invariant
  const float *D, *bias;        // [kLanes]
};

// Every block's parameters, transposed once per call (they do not depend on the batch row).
class BlockTables {
 public:
  explicit BlockTables(const ScanArgs& a)
      : N_(a.N), E_(a.E), stride_((4 * a.N + 2) * kLanes),
        t_(size_t(((a.E + kLanes - 1) / kLanes) * stride_)) {
    const int64_t nblk = (a.E + kLanes - 1) / kLanes;
    for (int64_t blk = 0; blk < nblk; ++blk) {
      float* A = t_.data() + blk * stride_;
      float *A2 = A + N_ * kLanes, *B = A2 + N_ * kLanes, *C = B + N_ * kLanes, *D = C + N_ * kLanes;
      float* bias = D + kLanes;
      const int64_t e0 = blk * kLanes;
      for (int64_t n = 0; n < a.N; ++n)
        for (int l = 0; l < kLanes; ++l) {
          const bool in = e0 + l < a.E;
          const int64_t en = (e0 + l) * a.N + n, o = n * kLanes + l;
          A[o] = in ? a.A[en] : 0.f;
          A2[o] = in ? a.A[en] * kLog2e : 0.f;
          B[o] = in && !a.var_B ? a.Bm[en] : 0.f;
          C[o] = in && !a.var_C ? a.Cm[en] : 0.f;
        }
      for (int l = 0; l < kLanes; ++l) {
        const bool in = e0 + l < a.E;
        D[l] = in && a.D ? a.D[e0 + l] : 0.f;
        bias[l] = in && a.bias ? a.bias[e0 + l] : 0.f;
      }
    }
  }
  BlockParams block(int64_t blk) const {
    const float* A = t_.data() + blk * stride_;
    BlockParams p;
    p.e0 = blk * kLanes;
    p.lanes = int(std::min<int64_t>(kLanes, E_ - p.e0));
    p.A = A, p.A2 = A + N_ * kLanes, p.B = p.A2 + N_ * kLanes, p.C = p.B + N_ * kLanes;
    p.D = p.C + N_ * kLanes, p.bias = p.D + kLanes;
    return p;
  }

 private:
  int64_t N_, E_, stride_;
  std::vector<float> t_;
};

// One step's per-channel inputs: x = delta + bias, dt (after softplus), u, dt * u.
struct StepIn {
  float x[kLanes], dt[kLanes], u[kLanes], dtu[kLanes];
};

inline void load_step(const ScanArgs& a, const BlockParams& p, int64_t row, StepIn& s) {
  load_lanes(a.u + row * a.E + p.e0, p.lanes, s.u);
  load_lanes(a.delta + row * a.E + p.e0, p.lanes, s.x);
#pragma omp simd
  for (int l = 0; l < kLanes; ++l) {
    s.x[l] += p.bias[l];
    s.dt[l] = a.softplus ? softplus_approx(s.x[l]) : s.x[l];
    s.dtu[l] = s.dt[l] * s.u[l];
  }
}

// This step's B and C as [N][kLanes] tables: broadcast rows of Bm, Cm when selective, the
// block's per-channel tables when time-invariant.
inline void step_tables(const ScanArgs& a, const BlockParams& p, int64_t row, float* bbuf,
                        float* cbuf, const float*& Bv, const float*& Cv) {
  auto fill = [&](const float* src, float* buf) {
    for (int64_t n = 0; n < a.N; ++n)
      for (int l = 0; l < kLanes; ++l) buf[n * kLanes + l] = src[row * a.N + n];
    return buf;
  };
  Bv = a.var_B ? fill(a.Bm, bbuf) : p.B;
  Cv = a.var_C ? fill(a.Cm, cbuf) : p.C;
}

// A step's B and C as lane l of state n sees them. RowBC (B and C both selective): this step's
// rows of Bm and Cm, one scalar per state broadcast over the lanes, read in place. TableBC
// (otherwise): [N][kLanes] tables from step_tables.
struct RowBC {
  const float *B, *C;
  RowBC(const ScanArgs& a, const BlockParams&, int64_t row, float*, float*)
      : B(a.Bm + row * a.N), C(a.Cm + row * a.N) {}
  Lanes b(int64_t n) const { return bcast(B[n]); }
  Lanes c(int64_t n) const { return bcast(C[n]); }
};
struct TableBC {
  const float *B, *C;
  TableBC(const ScanArgs& a, const BlockParams& p, int64_t row, float* bbuf, float* cbuf) {
    step_tables(a, p, row, bbuf, cbuf, B, C);
  }
  Lanes b(int64_t n) const { return ld(B + n * kLanes); }
  Lanes c(int64_t n) const { return ld(C + n * kLanes); }
};

// Calls f.template operator()<BC, NC>() with the B, C access of `a` and NC = N when N is the
// common 16 (loops of fixed length, unrolled), else NC = 0 (N read at run time). Both give the
// same bits: only the loop bounds are constants.
template <class F>
void dispatch(const ScanArgs& a, F&& f) {
  const bool rows = a.var_B && a.var_C;
  if (a.N == 16) rows ? f.template operator()<RowBC, 16>() : f.template operator()<TableBC, 16>();
  else rows ? f.template operator()<RowBC, 0>() : f.template operator()<TableBC, 0>();
}

// One step of one block: hout = exp(dt A) hin + dt u B per state, and the pre-gate output
// yy = C . hout + D u. hin may be hout. The decays exp(dt A) go to `decay` unless it is null.
template <int NC, class BC>
inline void block_step(int64_t Nrt, const BlockParams& p, const BC& bc, const StepIn& s,
                       const float* hin, float* hout, float* yy, float* decay) {
  const int64_t N = NC ? NC : Nrt;
  const Lanes dt = ld(s.dt), dtu = ld(s.dtu);
  Lanes acc = ld(p.D) * ld(s.u);
  auto state = [&](int64_t n, Lanes a) {
    const int64_t o = n * kLanes;
    if (decay) st(decay + o, a);
    const Lanes h = a * ld(hin + o) + dtu * bc.b(n);
    st(hout + o, h);
    acc += bc.c(n) * h;
  };
  // The decays of K states at a time, their operations interleaved (decays_of): one state's
  // decay is a chain of 14 dependent operations, and issued chain after chain the forward was
  // about 10% slower.
  constexpr int K = 4;
  int64_t n = 0;
  for (; n + K <= N; n += K) {
    Lanes A2[K], a[K];
    for (int k = 0; k < K; ++k) A2[k] = ld(p.A2 + (n + k) * kLanes);
    decays_of<K>(dt, A2, a);
    for (int k = 0; k < K; ++k) state(n + k, a[k]);
  }
  if constexpr (NC == 0 || NC % K != 0)
    for (; n < N; ++n) state(n, decay_of(dt, ld(p.A2 + n * kLanes)));
  st(yy, acc);
}

// Blocks per backward work item: enough items for the threads (>= ~8), at most kMaxGroup.
// A function of the shape only, so the summation order never depends on the thread count.
int64_t group_size(int64_t batch, int64_t nblk) {
  return std::clamp<int64_t>(batch * nblk / 8, 1, kMaxGroup);
}

// Per-thread scratch for the backward, laid out from `base` (every array a multiple of 16
// floats, so all stay 64-byte aligned). With base = nullptr it only counts the floats.
struct BackwardScratch {
  float *Bv, *Cv, *zero, *H, *decay, *yy, *dyy, *dz, *ddt, *sB, *accB, *accC, *carry, *dA, *dB, *dC, *dD, *dbias;
  StepIn* steps;
  int64_t used = 0;
  BackwardScratch(float* base, int64_t N, int64_t G) {
    const int64_t nl = N * kLanes;
    auto take = [&](int64_t n) {
      float* r = base ? base + used : nullptr;
      used += n;
      return r;
    };
    Bv = take(nl), Cv = take(nl), zero = take(nl);
    H = take((kChunk + 1) * nl), decay = take(kChunk * nl), yy = take(kChunk * kLanes);
    dyy = take(kChunk * kLanes), dz = take(kChunk * kLanes), ddt = take(kChunk * kLanes), sB = take(kChunk * kLanes);
    accB = take(kChunk * nl), accC = take(kChunk * nl);
    carry = take(G * nl), dA = take(G * nl), dB = take(G * nl), dC = take(G * nl);
    dD = take(G * kLanes), dbias = take(G * kLanes);
    steps = reinterpret_cast<StepIn*>(take(kChunk * int64_t(sizeof(StepIn) / sizeof(float))));
  }
};

// Where the backward writes: input gradients (null when not needed) and the partials.
struct ScanGrads {
  const float* gout;
  float *gu, *gdelta, *gz;
  bool fresh_u, fresh_delta, fresh_z;  // uninitialised (grad_for_write): each element is set once
  float *partA, *partD, *partBias;  // [batch][Epad][N], [batch][Epad], [batch][Epad]
  float *partB, *partC;             // time-invariant: [batch][Epad][N]; selective: [groups][batch][T][N]
};

// The backward of blocks [g*G, g*G + G) of batch row b (one work item).
template <class BC, int NC>
void backward_item(const ScanArgs& a, const BlockTables& tab, const float* ckpt,
                   const ScanGrads& gr, int64_t b, int64_t g, int64_t G, BackwardScratch& w) {
  const int64_t N = NC ? NC : a.N, T = a.T, E = a.E, nl = N * kLanes;
  const int64_t nblk = (E + kLanes - 1) / kLanes, Epad = nblk * kLanes;
  const int64_t nchunks = (T + kChunk - 1) / kChunk;
  const int64_t blk0 = g * G, nb = std::min(G, nblk - blk0);
  for (float* lane_sums : {w.carry, w.dA, w.dB, w.dC})
    std::fill(lane_sums, lane_sums + nb * nl, 0.f);
  std::fill(w.dD, w.dD + nb * kLanes, 0.f);
  std::fill(w.dbias, w.dbias + nb * kLanes, 0.f);
  std::fill(w.zero, w.zero + nl, 0.f);
  for (int64_t c = nchunks - 1; c >= 0; --c) {
    const int64_t t0 = c * kChunk, L = std::min(kChunk, T - t0);
    for (int64_t j = 0; j < nb; ++j) {
      const int64_t blk = blk0 + j;
      const BlockParams p = tab.block(blk);
      float *carry = w.carry + j * nl, *dA = w.dA + j * nl, *dD = w.dD + j * kLanes,
            *dbias = w.dbias + j * kLanes;
      // Recompute the chunk's states: H[i + 1] is the state after step t0 + i. Each pass over
      // the chunk does one kind of work, so that the per-step arithmetic off the recurrences
      // overlaps across steps.
      std::memcpy(w.H, ckpt + ((b * nblk + blk) * nchunks + c) * nl, sizeof(float) * size_t(nl));
      for (int64_t i = 0; i < L; ++i) {
        const int64_t row = b * T + t0 + i;
        prefetch_rows({a.u, a.delta, a.z, gr.gout, gr.gu, gr.gdelta, gr.gz}, row, b * T + t0 + L, E, p.e0);
        load_step(a, p, row, w.steps[i]);
      }
      for (int64_t i = 0; i < L; ++i) {
        const int64_t row = b * T + t0 + i;
        block_step<NC>(N, p, BC(a, p, row, w.Bv, w.Cv), w.steps[i], w.H + i * nl, w.H + (i + 1) * nl, w.yy + i * kLanes,
                   w.decay + i * nl);
      }
      // Through the gate: d yy and d z of each step (dD sums backwards in time).
      for (int64_t i = L - 1; i >= 0; --i) {
        const int64_t row = b * T + t0 + i;
        const float *u = w.steps[i].u, *yy = w.yy + i * kLanes;
        float *dyy = w.dyy + i * kLanes, *dz = w.dz + i * kLanes;
        float g_out[kLanes], zz[kLanes];
        load_lanes(gr.gout + row * E + p.e0, p.lanes, g_out);
        if (a.z) load_lanes(a.z + row * E + p.e0, p.lanes, zz);
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) {
          if (a.z) {  // out = yy * silu(z)
            const float sg = sigmoid_approx(zz[l]);
            dyy[l] = g_out[l] * zz[l] * sg;
            dz[l] = g_out[l] * yy[l] * sg * (1.f + zz[l] * (1.f - sg));
          } else {
            dyy[l] = g_out[l];
            dz[l] = 0.f;
          }
          dD[l] += dyy[l] * u[l];
        }
      }
      // The adjoint recurrence, backwards through the chunk. With N fixed (16) the carried
      // adjoint stays in registers through the chunk (a load and a store fewer per state and
      // step); otherwise it is read and written per step.
      Lanes carry_regs[NC ? NC : 1];
      if constexpr (NC > 0)
        for (int64_t n = 0; n < NC; ++n) carry_regs[n] = ld(carry + n * kLanes);
      auto carried = [&](int64_t n) {
        if constexpr (NC > 0) return carry_regs[n];
        else return ld(carry + n * kLanes);
      };
      auto carry_to = [&](int64_t n, Lanes v) {
        if constexpr (NC > 0) carry_regs[n] = v;
        else st(carry + n * kLanes, v);
      };
      for (int64_t i = L - 1; i >= 0; --i) {
        const int64_t row = b * T + t0 + i;
        const StepIn& s = w.steps[i];
        const BC bc(a, p, row, w.Bv, w.Cv);
        // Lane sums, reduced across lanes later: selective rows start at the group's first
        // block (read zeros there instead of clearing the rows first).
        float* dBrow = a.var_B ? w.accB + i * nl : w.dB + j * nl;
        float* dCrow = a.var_C ? w.accC + i * nl : w.dC + j * nl;
        const float* dBin = a.var_B && j == 0 ? w.zero : dBrow;
        const float* dCin = a.var_C && j == 0 ? w.zero : dCrow;
        const float *hprev = w.H + i * nl, *hcur = w.H + (i + 1) * nl, *decay = w.decay + i * nl;
        const Lanes dyyv = ld(w.dyy + i * kLanes), dtu = ld(s.dtu), dt = ld(s.dt);
        Lanes ddtv{}, sBv{};
#pragma GCC unroll 16
        for (int64_t n = 0; n < N; ++n) {
          const int64_t o = n * kLanes;
          const Lanes da = ld(decay + o);
          const Lanes dh = carried(n) + bc.c(n) * dyyv;  // d loss / d h_t
          st(dCrow + o, ld(dCin + o) + ld(hcur + o) * dyyv);
          st(dBrow + o, ld(dBin + o) + dh * dtu);
          const Lanes q = dh * ld(hprev + o) * da;  // d loss / d(dt A), per state
          st(dA + o, ld(dA + o) + q * dt);
          ddtv += q * ld(p.A + o);
          sBv += dh * bc.b(n);
          carry_to(n, da * dh);
        }
        st(w.ddt + i * kLanes, ddtv);
        st(w.sB + i * kLanes, sBv);
      }
      if constexpr (NC > 0)
        for (int64_t n = 0; n < NC; ++n) st(carry + n * kLanes, carry_regs[n]);
      // d u, d delta (through the softplus) and d z of each step (d bias sums backwards in time).
      for (int64_t i = L - 1; i >= 0; --i) {
        const int64_t row = b * T + t0 + i;
        const StepIn& s = w.steps[i];
        const float *dyy = w.dyy + i * kLanes, *ddt = w.ddt + i * kLanes, *sB = w.sB + i * kLanes;
        float du[kLanes], dx[kLanes];
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) {
          du[l] = dyy[l] * p.D[l] + s.dt[l] * sB[l];
          const float dt_grad = ddt[l] + s.u[l] * sB[l];
          // PyTorch's softplus backward: 1 above the threshold, sigmoid(x) below.
          dx[l] = !a.softplus || s.x[l] > 20.f ? dt_grad : dt_grad * sigmoid_approx(s.x[l]);
          dbias[l] += dx[l];
        }
        const int64_t off = row * E + p.e0;
        add_lanes(du, p.lanes, gr.gu ? gr.gu + off : nullptr, gr.fresh_u);
        add_lanes(dx, p.lanes, gr.gdelta ? gr.gdelta + off : nullptr, gr.fresh_delta);
        add_lanes(w.dz + i * kLanes, p.lanes, gr.gz ? gr.gz + off : nullptr, gr.fresh_z);
      }
    }
    // Selective dB, dC of this chunk: the group's lane sums, reduced across lanes.
    for (int pass = 0; pass < 2; ++pass) {
      if (!(pass == 0 ? a.var_B : a.var_C)) continue;
      const float* acc = pass == 0 ? w.accB : w.accC;
      float* part = (pass == 0 ? gr.partB : gr.partC) + ((g * a.batch + b) * T + t0) * N;
      for (int64_t i = 0; i < L * N; ++i) {
        float s = 0.f;
        for (int l = 0; l < kLanes; ++l) s += acc[i * kLanes + l];
        part[i] = s;
      }
    }
  }
  // Lane arrays to the per-batch partials ([Epad][N] rows: channel-major as A is).
  for (int64_t j = 0; j < nb; ++j) {
    const int64_t e0 = (blk0 + j) * kLanes;
    for (int l = 0; l < kLanes; ++l) {
      const int64_t e = e0 + l, pe = b * Epad + e;
      gr.partD[pe] = w.dD[j * kLanes + l];
      gr.partBias[pe] = w.dbias[j * kLanes + l];
      for (int64_t n = 0; n < N; ++n) {
        gr.partA[pe * N + n] = w.dA[j * nl + n * kLanes + l];
        if (!a.var_B) gr.partB[pe * N + n] = w.dB[j * nl + n * kLanes + l];
        if (!a.var_C) gr.partC[pe * N + n] = w.dC[j * nl + n * kLanes + l];
      }
    }
  }
}

// The forward of block blk of batch row b: h (scratch) starts at zero; the state entering
// each chunk goes to the checkpoints `pc` unless null.
template <class BC, int NC>
void forward_item(const ScanArgs& a, const BlockTables& tab, int64_t b, int64_t blk, float* bbuf,
                  float* cbuf, float* h, float* py, float* pc) {
  const int64_t T = a.T, E = a.E, N = NC ? NC : a.N, nl = N * kLanes;
  const int64_t nblk = (E + kLanes - 1) / kLanes, nchunks = (T + kChunk - 1) / kChunk;
  const BlockParams p = tab.block(blk);
  std::memset(h, 0, sizeof(float) * size_t(nl));
  // Steps in groups of kStage: first every step's inputs (independent of each other), then the
  // recurrence, then the gate and the stores, so that the per-step arithmetic off the
  // recurrence overlaps instead of waiting between its steps.
  StepIn s[kStage];
  float yy[kStage][kLanes];
  for (int64_t t0 = 0; t0 < T; t0 += kStage) {
    const int64_t n_steps = std::min(kStage, T - t0);
    for (int64_t i = 0; i < n_steps; ++i) {
      const int64_t row = b * T + t0 + i;
      prefetch_rows({a.u, a.delta, a.z, py}, row, (b + 1) * T, E, p.e0);
      load_step(a, p, row, s[i]);
    }
    for (int64_t i = 0; i < n_steps; ++i) {
      const int64_t t = t0 + i, row = b * T + t;
      if (pc && t % kChunk == 0)
        std::memcpy(pc + ((b * nblk + blk) * nchunks + t / kChunk) * nl, h, sizeof(float) * size_t(nl));
      block_step<NC>(N, p, BC(a, p, row, bbuf, cbuf), s[i], h, h, yy[i], nullptr);
    }
    for (int64_t i = 0; i < n_steps; ++i) {
      const int64_t row = b * T + t0 + i;
      if (a.z) {
        float zz[kLanes];
        load_lanes(a.z + row * E + p.e0, p.lanes, zz);
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) yy[i][l] *= zz[l] * sigmoid_approx(zz[l]);
      }
      store_lanes(yy[i], p.lanes, py + row * E + p.e0);
    }
  }
}

// grad[i] += sum over k of part[k][i] (k = 0..parts-1 in order), for i in [0, n) with the
// partial rows of length `stride` (>= n; rows are padded to Epad channels). kLanes elements side
// by side, each summed in its order: each sum is a chain of `parts` dependent adds (dA's 64 batch
// rows at E64), too slow one element at a time.
void add_partials(float* grad, const float* part, int64_t parts, int64_t n, int64_t stride) {
  if (!grad) return;
  const int64_t nblk = (n + kLanes - 1) / kLanes;
#pragma omp parallel for schedule(static) if (n * parts > kParallelMin)
  for (int64_t blk = 0; blk < nblk; ++blk) {
    const int64_t i0 = blk * kLanes;
    const int width = int(std::min<int64_t>(kLanes, n - i0));
    float s[kLanes] = {}, row[kLanes];
    for (int64_t k = 0; k < parts; ++k) {
      load_lanes(part + k * stride + i0, width, row);
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) s[l] += row[l];
    }
    add_lanes(s, width, grad + i0, false);
  }
}

}  // namespace

Tensor selective_scan(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm,
                      const Tensor& Cm, const Tensor& D, const Tensor& z,
                      const Tensor& delta_bias, bool delta_softplus) {
  const ScanArgs a = scan_args("selective_scan", u, delta, A, Bm, Cm, D, z, delta_bias, delta_softplus);
  const int64_t batch = a.batch, T = a.T, E = a.E, N = a.N, nl = N * kLanes;
  const int64_t nblk = (E + kLanes - 1) / kLanes, nchunks = (T + kChunk - 1) / kChunk;
  const bool grad = needs_grad({u, delta, A, Bm, Cm, D, z, delta_bias});
  Tensor out = Tensor::empty(u.shape());
  // The state entering each chunk, per block: [batch][nblk][nchunks][N][kLanes].
  Tensor ckpt = grad ? Tensor::empty(Shape{batch, nblk, nchunks, N, kLanes}) : Tensor();
  float* py = out.data();
  float* pc = grad ? ckpt.data() : nullptr;
  // Shared with the backward, which reads the same parameters (saved: unchanged since).
  const auto tab = std::make_shared<const BlockTables>(a);
  // Per thread: this step's B, C tables and the state h.
  Tensor scratch = Tensor::empty(Shape{omp_get_max_threads(), 3 * nl});
#pragma omp parallel
  {
    float* w = scratch.data() + omp_get_thread_num() * 3 * nl;
    float *bbuf = w, *cbuf = w + nl, *h = w + 2 * nl;
#pragma omp for schedule(static)
    for (int64_t item = 0; item < batch * nblk; ++item)
      dispatch(a, [&]<class BC, int NC>() {
        forward_item<BC, NC>(a, *tab, item / nblk, item % nblk, bbuf, cbuf, h, py, pc);
      });
  }
  if (!grad) return out;

  std::vector<Tensor> saved{u, delta, A, Bm, Cm};
  for (const Tensor& t : {D, z, delta_bias})
    if (t.defined()) saved.push_back(t);
  record("selective_scan", out, saved,
         [a, u, delta, A, Bm, Cm, D, z, delta_bias, ckpt, tab, nblk](const float* gout) {
    const int64_t batch = a.batch, T = a.T, E = a.E, N = a.N, Epad = nblk * kLanes;
    const int64_t G = group_size(batch, nblk), groups = (nblk + G - 1) / G;
    ScanGrads gr{};
    gr.gout = gout;
    // Each element of du, d delta and dz is set once, so a new buffer is written rather than
    // cleared and added to; not when two of them are one tensor (both add into one buffer).
    if (u.impl() != delta.impl() && u.impl() != z.impl() && delta.impl() != z.impl()) {
      gr.gu = grad_for_write(u, &gr.fresh_u);
      gr.gdelta = grad_for_write(delta, &gr.fresh_delta);
      gr.gz = grad_for_write(z, &gr.fresh_z);
    } else {
      gr.gu = grad_of(u), gr.gdelta = grad_of(delta), gr.gz = grad_of(z);
    }
    Tensor partA = Tensor::empty(Shape{batch, Epad, N}), partD = Tensor::empty(Shape{batch, Epad}),
           partBias = Tensor::empty(Shape{batch, Epad});
    Tensor partB = a.var_B ? Tensor::empty(Shape{groups, batch, T, N}) : Tensor::empty(Shape{batch, Epad, N});
    Tensor partC = a.var_C ? Tensor::empty(Shape{groups, batch, T, N}) : Tensor::empty(Shape{batch, Epad, N});
    gr.partA = partA.data(), gr.partD = partD.data(), gr.partBias = partBias.data();
    gr.partB = partB.data(), gr.partC = partC.data();
    const int64_t per_thread = BackwardScratch(nullptr, N, G).used;
    Tensor scratch = Tensor::empty(Shape{omp_get_max_threads(), per_thread});
#pragma omp parallel
    {
      const lanes::FlushSubnormals flush;  // the adjoint's decay (lanes.hpp)
      BackwardScratch w(scratch.data() + omp_get_thread_num() * per_thread, N, G);
#pragma omp for schedule(static)
      for (int64_t item = 0; item < batch * groups; ++item)
        dispatch(a, [&]<class BC, int NC>() {
          backward_item<BC, NC>(a, *tab, ckpt.data(), gr, item / groups, item % groups, G, w);
        });
    }
    // Combine the partials in a fixed order (over batch rows, or over channel groups).
    const int64_t EN = E * N;
    add_partials(grad_of(A), gr.partA, batch, EN, Epad * N);
    add_partials(grad_of(D), gr.partD, batch, E, Epad);
    add_partials(grad_of(delta_bias), gr.partBias, batch, E, Epad);
    if (a.var_B) add_partials(grad_of(Bm), gr.partB, groups, batch * T * N, batch * T * N);
    else add_partials(grad_of(Bm), gr.partB, batch, EN, Epad * N);
    if (a.var_C) add_partials(grad_of(Cm), gr.partC, groups, batch * T * N, batch * T * N);
    else add_partials(grad_of(Cm), gr.partC, batch, EN, Epad * N);
  });
  return out;
}

}  // namespace tri
