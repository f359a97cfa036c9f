// The SSD scan's decoding step (ssd_scan.hpp): the fused forward's step_state on one token, so
// that stepping token by token gives the forward's bits.
#include <algorithm>
#include <cmath>
#include <vector>

#include "framework/kernels/ssd_rows.hpp"
#include "framework/kernels/ssd_scan.hpp"
#include "framework/runtime/runtime.hpp"

namespace tri {

using namespace ssd_detail;

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
