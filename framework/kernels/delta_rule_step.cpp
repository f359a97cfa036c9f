// The delta rule's naive reference (the recurrence in ops) and its decoding step (the fused
// kernel's step_state on one token): delta_rule.hpp.
#include <algorithm>
#include <string>
#include <vector>

#include "framework/kernels/delta_rule.hpp"
#include "framework/kernels/delta_rule_step.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/runtime.hpp"

namespace tri {

using namespace delta_detail;

Tensor delta_rule_naive(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta, const Tensor& g,
                        float scale) {
  const Dims d = check_inputs("delta_rule_naive", q, k, v, beta, g);
  const int64_t B = d.B, H = d.H, Dk = d.Dk, Dv = d.Dv;
  // Time-major copies, so that each step is a view.
  const Tensor qt = permute(q, {1, 0, 2, 3}), kt = permute(k, {1, 0, 2, 3}), vt = permute(v, {1, 0, 2, 3});
  const Tensor bt = permute(beta, {1, 0, 2}), gt = g.defined() ? permute(g, {1, 0, 2}) : Tensor();
  Tensor M = Tensor::zeros(Shape{B, H, Dk, Dv});  // S^T
  std::vector<Tensor> outs;
  for (int64_t t = 0; t < d.T; ++t) {
    const Tensor qs = reshape(slice(qt, 0, t, t + 1), Shape{B, H, Dk, 1});
    const Tensor ks = reshape(slice(kt, 0, t, t + 1), Shape{B, H, Dk, 1});
    const Tensor vs = reshape(slice(vt, 0, t, t + 1), Shape{B, H, 1, Dv});
    const Tensor bs = reshape(slice(bt, 0, t, t + 1), Shape{B, H, 1, 1});
    const Tensor P = g.defined() ? mul(M, exp(reshape(slice(gt, 0, t, t + 1), Shape{B, H, 1, 1}))) : M;
    const Tensor u = sum(mul(P, ks), {2}, true);  // [B, H, 1, Dv]: S k
    M = add(P, mul(ks, mul(bs, sub(vs, u))));      // S + beta (v - S k) k^T, transposed
    outs.push_back(reshape(mul_scalar(sum(mul(M, qs), {2}), scale), Shape{1, B, H, Dv}));
  }
  return permute(concat(outs, 0), {1, 0, 2, 3});
}

Tensor delta_rule_step(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta, const Tensor& g,
                       Tensor& M, float scale) {
  const Dims d = check_inputs("delta_rule_step", q, k, v, beta, g);
  if (d.T != 1)
    throw Error("delta_rule_step: takes one time step, got T = " + std::to_string(d.T) + " in q " + q.shape().str());
  const Shape m_shape{d.B, d.H, d.Dk, d.Dv};
  if (!M.defined() || M.shape() != m_shape)
    throw Error("delta_rule_step: state " + shape_text(M) + " must be " + m_shape.str());
  Tensor out = Tensor::empty(Shape{d.B, 1, d.H, d.Dv});
  const int64_t BH = d.B * d.H, n = d.Dk * d.Dv, np = d.Dk * d.Dvp;
  const bool pad = d.Dv != d.Dvp;  // the step runs on a padded copy of the state
  // An orphaned `omp for`: in parallel_if's region it splits the heads.
  parallel_if(BH * n > (1 << 16), [&] {
    std::vector<float> Mp(size_t(pad ? np : 0)), vp(size_t(d.Dvp)), op(size_t(d.Dvp));
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < BH; ++bh) {
      const HeadRows r = rows_of(d, bh, q.data(), k.data(), v.data(), beta.data(), g.defined() ? g.data() : nullptr);
      float* Mh = M.data() + bh * n;
      float* W = pad ? Mp.data() : Mh;
      if (pad) {
        std::fill(Mp.begin(), Mp.end(), 0.f);
        for (int64_t j = 0; j < d.Dk; ++j) std::copy(Mh + j * d.Dv, Mh + (j + 1) * d.Dv, W + j * d.Dvp);
      }
      std::fill(vp.begin(), vp.end(), 0.f);
      copy_row(r.v, d.Dv, vp.data());
      step_state(W, W, d.Dk, d.Dvp, r.q, r.k, vp.data(), r.beta[0], alpha_at(r, 0), r.g, scale, op.data(), nullptr);
      std::copy(op.begin(), op.begin() + d.Dv, out.data() + bh * d.Dv);
      if (pad)
        for (int64_t j = 0; j < d.Dk; ++j) std::copy(W + j * d.Dvp, W + j * d.Dvp + d.Dv, Mh + j * d.Dv);
    }
  });
  M.bump_version();
  return out;
}

}  // namespace tri
