// The SSD scan's rows (ssd_scan.hpp's layout), shared by the fused kernel (ssd_scan.cpp), the
// naive reference (ssd_scan_naive.cpp) and the decoding step (ssd_scan_step.cpp): the checked
// dimensions, one (batch, head)'s rows, and the step every recurrent path runs (step_state).
// Internal to framework/kernels.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/core/tensor.hpp"
#include "framework/simd/lanes.hpp"

namespace tri::ssd_detail {

using lanes::bcast, lanes::hsum, lanes::ld, lanes::st, lanes::Lanes, lanes::kLanes;

inline int64_t padded(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

struct Dims {
  int64_t B, T, H, P, G, N, Np, hg;  // hg: heads per group
};

inline std::string shape_text(const Tensor& t) { return t.defined() ? t.shape().str() : "undefined"; }

inline Dims check_inputs(const char* op, const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm,
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

// One step from the state `from` to S [P][Np] (ssd_scan.cpp's header; from may be S: the
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

inline HeadRows rows_of(const Dims& d, int64_t bh, const float* x, const float* dt, const float* B,
                        const float* C) {
  const int64_t b = bh / d.H, h = bh % d.H, g = h / d.hg;
  const int64_t ox = (b * d.T * d.H + h) * d.P, odt = b * d.T * d.H + h, obc = (b * d.T * d.G + g) * d.N;
  return {x + ox, dt + odt, B + obc, C + obc, d.H * d.P, d.H, d.G * d.N, ox, odt, obc, h};
}

inline void copy_row(const float* src, int64_t n, float* dst) { std::copy(src, src + n, dst); }

constexpr int64_t kChunk = 32;  // steps between the forward's saved states: the backward's chunks

// Where one (batch, head)'s gradients go (null: not needed): x and dt at the head's first rows
// (added into), B and C rows sBC floats apart (added into when add_BC, else written), A and D one
// float each (written).
struct GradRows {
  float *x, *dt, *B, *C, *A, *D;
  int64_t sBC;
  bool add_BC;
};

// One head of a group for ChunkedBackward: its rows, A, decays a (exp(dt A)), D (or null), saved
// states (ckpt: the state [P][N] before step c kChunk), d y rows (gout, as x's) and gradients.
struct ChunkHead {
  HeadRows r;
  float A;
  const float *a, *D, *ckpt, *gout;
  GradRows gr;
};

// The backward of the heads of one (batch row, group), which share B and C, in chunks of kChunk
// steps as products of small matrices (ssd_scan_chunks.cpp). It serves N and P in whole vectors
// (serves()); holds its scratch. The group's gradients of B and C are added into heads[0].gr's rows.
class ChunkedBackward {
 public:
  static bool serves(const Dims& d) { return d.N == d.Np && d.P % kLanes == 0; }
  explicit ChunkedBackward(const Dims& d);
  void group(const ChunkHead* heads);  // d.hg heads

 private:
  void head_chunk(const ChunkHead& h, int64_t j, int64_t c);
  Dims d_;
  // The chunk's B and C (shared), C B^T, the heads' d G summed, the group's dB and dC.
  std::vector<float> Bc_, BcT_, Cc_, CBt_, dGsum_, dB_, dC_;
  // One head's chunk at a time; dS_ holds every head's d state (hg P N).
  std::vector<float> Xd_, XdT_, dY_, Lam_, M_, dG_, q_, S0T_, dS_, dST_, U_, dXd_, XdS_, WB_, EC_, EdY_, E_, W_, dl_;
  std::vector<float> dA_, dD_;  // hg floats; hg vectors of kLanes partial sums
};

}  // namespace tri::ssd_detail
