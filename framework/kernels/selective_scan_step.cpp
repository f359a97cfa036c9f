// The selective scan's argument checks and the recurrent step (decoding), beside the fused kernel
// (selective_scan.cpp) and the naive reference (selective_scan_naive.cpp). See selective_scan.hpp
// for the shapes.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "framework/kernels/scan_args.hpp"
#include "framework/kernels/scan_lanes.hpp"
#include "framework/kernels/selective_scan.hpp"
#include "framework/simd/vec_math.hpp"
#include "framework/core/autograd.hpp"

namespace tri {

namespace scan_detail {

ScanArgs scan_args(const char* op, const Tensor& u, const Tensor& delta, const Tensor& A,
                   const Tensor& Bm, const Tensor& Cm, const Tensor& D, const Tensor& z,
                   const Tensor& bias, bool softplus) {
  const std::string o = std::string(op) + ": ";
  if (!u.defined() || u.dim() != 3) throw Error(o + "u " + shape_of(u) + " must be [B, T, E]");
  ScanArgs a;
  a.batch = u.size(0), a.T = u.size(1), a.E = u.size(2);
  if (!delta.defined() || delta.shape() != u.shape())
    throw Error(o + "delta " + shape_of(delta) + " must match u " + u.shape().str());
  if (!A.defined() || A.dim() != 2 || A.size(0) != a.E || A.size(1) < 1)
    throw Error(o + "A " + shape_of(A) + " must be [E, N] with E = " + std::to_string(a.E) + ", N >= 1");
  a.N = A.size(1);
  const Shape sel{a.batch, a.T, a.N}, lti{a.E, a.N};
  auto check_bc = [&](const Tensor& m, const char* name, bool& var) {
    if (!m.defined() || (m.shape() != sel && m.shape() != lti))
      throw Error(o + name + " " + shape_of(m) + " must be " + sel.str() + " (selective) or " +
                  lti.str() + " (time-invariant)");
    var = m.shape() == sel;
  };
  check_bc(Bm, "B", a.var_B);
  check_bc(Cm, "C", a.var_C);
  for (const auto& [t, name] : {std::pair{&D, "D"}, std::pair{&bias, "delta_bias"}})
    if (t->defined() && t->shape() != Shape{a.E})
      throw Error(o + name + " " + t->shape().str() + " must be [" + std::to_string(a.E) + "] or undefined");
  if (z.defined() && z.shape() != u.shape())
    throw Error(o + "z " + z.shape().str() + " must match u " + u.shape().str() + " or be undefined");
  a.u = u.data(), a.delta = delta.data(), a.A = A.data(), a.Bm = Bm.data(), a.Cm = Cm.data();
  a.D = D.defined() ? D.data() : nullptr;
  a.z = z.defined() ? z.data() : nullptr;
  a.bias = bias.defined() ? bias.data() : nullptr;
  a.softplus = softplus;
  return a;
}

}  // namespace scan_detail

using namespace scan_detail;
using namespace scan_lanes;

Tensor selective_scan_step(const Tensor& u, const Tensor& delta, const Tensor& A,
                           const Tensor& Bm, const Tensor& Cm, const Tensor& D, const Tensor& z,
                           const Tensor& delta_bias, bool delta_softplus, Tensor& h) {
  const ScanArgs a = scan_args("selective_scan_step", u, delta, A, Bm, Cm, D, z, delta_bias, delta_softplus);
  if (a.T != 1) throw Error("selective_scan_step: u " + u.shape().str() + " must hold one step [B, 1, E]");
  const int64_t batch = a.batch, E = a.E, N = a.N;
  if (!h.defined() || h.shape() != Shape{batch, E, N})
    throw Error("selective_scan_step: state h " + shape_of(h) + " must be " + Shape{batch, E, N}.str());
  Tensor out = Tensor::empty(u.shape());
  float *ph = h.data(), *py = out.data();
  // Per channel: the same arithmetic, in the same order, as one step of the fused scan. First
  // every channel's dt and dt u (vectorised across channels), then each channel's states 16 at
  // a time and its output, then the gate (vectorised).
  std::vector<float> dts(size_t(batch * E)), dtus(size_t(batch * E));
#pragma omp simd
  for (int64_t be = 0; be < batch * E; ++be) {
    const float x = a.delta[be] + (a.bias ? a.bias[be % E] : 0.f);
    dts[size_t(be)] = a.softplus ? softplus_approx(x) : x;
    dtus[size_t(be)] = dts[size_t(be)] * a.u[be];
  }
  // Channel be's states, 16 at a time (whole vectors straight from memory).
  auto states = [&](int64_t be) {
    const int64_t b = be / E, e = be % E;
    const float *Bn = a.var_B ? a.Bm + b * N : a.Bm + e * N, *A = a.A + e * N;
    float* hb = ph + be * N;
    for (int64_t n0 = 0; n0 < N; n0 += kLanes) {
      const int lanes = int(std::min<int64_t>(kLanes, N - n0));
      auto part = [&](const float* src) {
        if (lanes == kLanes) return ld(src);
        float t[kLanes];
        load_lanes(src, lanes, t);
        return ld(t);
      };
      const Lanes hn = decay_of(bcast(dts[size_t(be)]), part(A + n0) * kLog2e) * part(hb + n0) +
                       bcast(dtus[size_t(be)]) * part(Bn + n0);
      if (lanes == kLanes) {
        st(hb + n0, hn);
      } else {
        alignas(64) float t[kLanes];
        st(t, hn);
        store_lanes(t, lanes, hb + n0);
      }
    }
  };
  // Outputs y = D u + C . h of kGroup channels side by side: each one fused multiply-add per
  // state in order (as the scan), the channels' chains interleaved (one alone waits on its own).
  constexpr int64_t kGroup = 4;
  const int64_t groups = (batch * E + kGroup - 1) / kGroup;
#pragma omp parallel for schedule(static) if (batch * E * N > kParallelMin)
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t be0 = g * kGroup, count = std::min(kGroup, batch * E - be0);
    const float* Cn[kGroup];
    float y[kGroup];
    for (int64_t i = 0; i < count; ++i) {
      const int64_t be = be0 + i, b = be / E, e = be % E;
      states(be);
      Cn[i] = a.var_C ? a.Cm + b * N : a.Cm + e * N;
      y[i] = (a.D ? a.D[e] : 0.f) * a.u[be];
    }
    // A whole group with its count fixed, so that y stays in registers (with a run-time count
    // the step is 15-20% slower); the last, partial group one channel after another.
    if (count == kGroup) {
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < kGroup; ++i) y[i] = std::fma(Cn[i][n], ph[(be0 + i) * N + n], y[i]);
    } else {
      for (int64_t i = 0; i < count; ++i)
        for (int64_t n = 0; n < N; ++n) y[i] = std::fma(Cn[i][n], ph[(be0 + i) * N + n], y[i]);
    }
    for (int64_t i = 0; i < count; ++i) py[be0 + i] = y[i];
  }
  if (a.z) {
#pragma omp simd
    for (int64_t be = 0; be < batch * E; ++be) py[be] *= a.z[be] * sigmoid_approx(a.z[be]);
  }
  h.bump_version();
  return out;
}

}  // namespace tri
