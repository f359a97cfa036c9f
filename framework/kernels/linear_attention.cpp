// Causal linear attention: the fused recurrent kernel, its naive reference and the decoding step.
//
// Forward, per (batch, head), one pass over time with the state S (Dk x Dv) and z (Dk):
//   S += kn_t v_t^T;  z += kd_t;  den_t = qd_t . z + eps;  out_t = (qn_t^T S) / den_t.
// Backward. With g_t = d out_t, the gradients flowing into num_t and den_t are
//   gn_t = g_t / den_t   (Dv)   and   gd_t = -(g_t . out_t) / den_t   (scalar),
// and with R_s = sum_{t>=s} qn_t gn_t^T (Dk x Dv) and r_s = sum_{t>=s} gd_t qd_t (Dk):
//   d qn_t = S_t gn_t,   d qd_t = gd_t z_t,   d kn_s = R_s v_s,   d v_s = R_s^T kn_s,   d kd_s = r_s.
// S_t and z_t are prefix sums and R_s, r_s suffix sums, so backward is two sweeps: a forward
// one that rebuilds S_t, z_t from zero (the same arithmetic as the forward, no checkpoints, no
// subtraction of states) and a reverse one that accumulates R, r. Each holds O(Dk Dv) floats, so
// backward saves nothing beyond the inputs, the output and the denominators [B, T, H].
#include <algorithm>
#include <vector>

#include "framework/ops/activation_fns.hpp"
#include "framework/core/autograd.hpp"
#include "framework/kernels/linear_attention.hpp"
#include "framework/kernels/linear_attention_sweeps.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/runtime.hpp"

namespace tri {

namespace {

using namespace linear_attention_sweeps;

// Checks q, k [B, T, H, Dk], v [B, T, H, Dv] and the optional normaliser features (both or
// neither, shaped like q).
Dims check_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& q_den, const Tensor& k_den) {
  auto fail = [&](const std::string& why) { return Error(std::string(op) + ": " + why); };
  if (!q.defined() || !k.defined() || !v.defined()) throw fail("q, k and v must be defined");
  if (q.dim() != 4) throw fail("q must be [B, T, H, Dk], got " + q.shape().str());
  if (k.shape() != q.shape())
    throw fail("k " + k.shape().str() + " must have q's shape " + q.shape().str());
  if (v.dim() != 4 || v.size(0) != q.size(0) || v.size(1) != q.size(1) || v.size(2) != q.size(2))
    throw fail("v " + v.shape().str() + " must be [B, T, H, Dv] with q's B, T, H " +
               q.shape().str());
  if (q_den.defined() != k_den.defined())
    throw fail("q_den and k_den must both be given or both be undefined");
  for (const Tensor* t : {&q_den, &k_den})
    if (t->defined() && t->shape() != q.shape())
      throw fail("q_den/k_den " + t->shape().str() + " must have q's shape " + q.shape().str());
  return {q.size(0), q.size(1), q.size(2), q.size(3), v.size(3)};
}

// The forward kernel over every (batch, head): out [B, T, H, Dv] and den [B, T, H].
void forward_all(const Dims& d, const float* pq, const float* pk, const float* pv, const float* pqd,
                 const float* pkd, float eps, float* po, float* pden) {
  const int64_t BH = d.B * d.H, Dvp = padded(d.Dv);
#pragma omp parallel
  {
    std::vector<float> state(size_t(d.Dk * Dvp + d.Dk + forward_work_size(d)));
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < BH; ++bh) {
      const int64_t b = bh / d.H, h = bh % d.H;
      std::fill(state.begin(), state.end(), 0.f);
      float *S = state.data(), *z = S + d.Dk * Dvp;
      forward_head(d, rows_of(d, bh, pq, pk, pv, pqd, pkd), S, z, eps,
                   po + (b * d.T * d.H + h) * d.Dv, pden + b * d.T * d.H + h, d.H, z + d.Dk);
    }
  }
}

// The backward kernel over every (batch, head), adding into the non-null gradients of gr.
void backward_all(const Dims& d, const float* pq, const float* pk, const float* pv, const float* pqd,
                  const float* pkd, const GradRows& gr, const float* g, const float* po,
                  const float* pden) {
  const int64_t BH = d.B * d.H;
#pragma omp parallel
  {
    BackwardScratch scratch(d);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < BH; ++bh) {
      const int64_t b = bh / d.H, h = bh % d.H;
      const int64_t ok = (b * d.T * d.H + h) * d.Dk, ov = (b * d.T * d.H + h) * d.Dv;
      auto at = [](float* p, int64_t o) { return p ? p + o : nullptr; };
      const GradRows gh{at(gr.gq, ok), at(gr.gk, ok), at(gr.gv, ov), at(gr.gqd, ok), at(gr.gkd, ok)};
      backward_head(d, rows_of(d, bh, pq, pk, pv, pqd, pkd), gh, g + ov, po + ov,
                    pden + b * d.T * d.H + h, scratch);
    }
  }
}

// phi(x) as a new tensor, not recorded.
template <class Phi>
Tensor mapped(const Tensor& x, Phi phi) {
  Tensor y = Tensor::empty(x.shape());
  const float* px = x.data();
  float* py = y.data();
  const int64_t n = x.numel();
#pragma omp parallel for simd schedule(static) if (n > kParallelSimdMin)
  for (int64_t i = 0; i < n; ++i) py[i] = phi.f(px[i]);
  return y;
}

// Where the kernel's gradient for phi(x) goes: x's own gradient buffer when x has none yet
// (then scaled in place by phi'(x)), else a zeroed temporary added into it.
struct MappedGrad {
  Tensor tmp;
  float* dx = nullptr;      // x's gradient, or null when x needs none
  float* dphi = nullptr;   // the kernel's target
  explicit MappedGrad(const Tensor& x) {
    const bool fresh = !x.grad().defined();
    dx = grad_of(x);
    if (!dx) return;
    if (!fresh) tmp = Tensor::zeros(x.shape());
    dphi = fresh ? dx : tmp.data();
  }
  // d x = d phi(x) phi'(x), as the unary op's backward: the same bits.
  template <class Phi>
  void chain(const Tensor& x, const Tensor& phi_x, Phi phi) const {
    if (!dx) return;
    const float *px = x.data(), *py = phi_x.data(), *gp = dphi;
    set_or_add_grad(dx, gp == dx, x.numel(), [=](int64_t i) { return gp[i] * phi.df(px[i], py[i]); });
  }
};

template <class Phi>
Tensor linear_attention_phi(const Tensor& q, const Tensor& k, const Tensor& v, Phi phi, float eps) {
  const Dims d = check_inputs("linear_attention", q, k, v, Tensor(), Tensor());
  Tensor out = Tensor::empty(Shape{d.B, d.T, d.H, d.Dv});
  Tensor den = Tensor::empty(Shape{d.B, d.T, d.H});
  {
    const Tensor fq = mapped(q, phi), fk = mapped(k, phi);
    forward_all(d, fq.data(), fk.data(), v.data(), fq.data(), fk.data(), eps, out.data(), den.data());
  }
  if (!needs_grad({q, k, v})) return out;
  record("linear_attention", out, {q, k, v, out}, [q, k, v, out, den, d, phi](const float* g) {
    const Tensor fq = mapped(q, phi), fk = mapped(k, phi);  // recomputed, never stored
    const MappedGrad gq(q), gk(k);
    const GradRows gr{gq.dphi, gk.dphi, grad_of(v), gq.dphi, gk.dphi};
    backward_all(d, fq.data(), fk.data(), v.data(), fq.data(), fk.data(), gr, g, out.data(), den.data());
    gq.chain(q, fq, phi);
    gk.chain(k, fk, phi);
  });
  return out;
}

}  // namespace

Tensor linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_den,
                        const Tensor& k_den, float eps) {
  const Dims d = check_inputs("linear_attention", q, k, v, q_den, k_den);
  const bool sep = q_den.defined();
  const Tensor qd_t = sep ? q_den : q, kd_t = sep ? k_den : k;
  Tensor out = Tensor::empty(Shape{d.B, d.T, d.H, d.Dv});
  Tensor den = Tensor::empty(Shape{d.B, d.T, d.H});
  forward_all(d, q.data(), k.data(), v.data(), qd_t.data(), kd_t.data(), eps, out.data(), den.data());
  if (!needs_grad({q, k, v, q_den, k_den})) return out;
  std::vector<Tensor> saved = {q, k, v, out};
  if (sep) saved.insert(saved.end(), {q_den, k_den});
  record("linear_attention", out, saved, [q, k, v, qd_t, kd_t, sep, out, den, d](const float* g) {
    GradRows gr{grad_of(q), grad_of(k), grad_of(v), nullptr, nullptr};
    gr.gqd = sep ? grad_of(qd_t) : gr.gq;
    gr.gkd = sep ? grad_of(kd_t) : gr.gk;
    backward_all(d, q.data(), k.data(), v.data(), qd_t.data(), kd_t.data(), gr, g, out.data(), den.data());
  });
  return out;
}

Tensor linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, FeatureMap phi, float eps) {
  switch (phi) {
    case FeatureMap::elu_plus_one: return linear_attention_phi(q, k, v, activation::EluPlusOne{}, eps);
    case FeatureMap::relu: return linear_attention_phi(q, k, v, activation::Relu{}, eps);
    case FeatureMap::identity: break;
  }
  return linear_attention(q, k, v, Tensor(), Tensor(), eps);
}

Tensor linear_attention_naive(const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& q_den, const Tensor& k_den, float eps) {
  const Dims d = check_inputs("linear_attention_naive", q, k, v, q_den, k_den);
  Tensor mask = Tensor::zeros(Shape{d.T, d.T});  // 1 where key s <= query t
  for (int64_t t = 0; t < d.T; ++t)
    for (int64_t s = 0; s <= t; ++s) mask.data()[t * d.T + s] = 1.f;
  auto heads_first = [](const Tensor& x) { return permute(x, {0, 2, 1, 3}); };  // [B, H, T, D]
  auto kernel = [&](const Tensor& a, const Tensor& b) {  // masked a b^T: [B, H, T, T]
    return mul(matmul(heads_first(a), heads_first(b), false, true), mask);
  };
  Tensor A = kernel(q, k);
  Tensor num = matmul(A, heads_first(v));                                  // [B, H, T, Dv]
  Tensor Ad = q_den.defined() ? kernel(q_den, k_den) : A;
  Tensor den = add_scalar(sum(Ad, {-1}, true), eps);                      // [B, H, T, 1]
  return permute(div(num, den), {0, 2, 1, 3});
}

Tensor linear_attention_step(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& S,
                             Tensor& z, const Tensor& q_den, const Tensor& k_den, float eps) {
  const Dims d = check_inputs("linear_attention_step", q, k, v, q_den, k_den);
  if (d.T != 1)
    throw Error("linear_attention_step: takes one time step, got T = " + std::to_string(d.T) +
                " in q " + q.shape().str());
  const Shape s_shape{d.B, d.H, d.Dk, d.Dv}, z_shape{d.B, d.H, d.Dk};
  if (!S.defined() || S.shape() != s_shape)
    throw Error("linear_attention_step: S " + (S.defined() ? S.shape().str() : "undefined") +
                " must be " + s_shape.str());
  if (!z.defined() || z.shape() != z_shape)
    throw Error("linear_attention_step: z " + (z.defined() ? z.shape().str() : "undefined") +
                " must be " + z_shape.str());
  const Tensor& qd = q_den.defined() ? q_den : q;
  const Tensor& kd = k_den.defined() ? k_den : k;
  Tensor out = Tensor::empty(Shape{d.B, 1, d.H, d.Dv});
  const int64_t BH = d.B * d.H, Dk = d.Dk, Dv = d.Dv, Dvp = padded(Dv);
  // The forward kernel with T = 1; S rows are padded to Dvp through a copy when Dv is not.
#pragma omp parallel if (BH * Dk * Dv > (1 << 16))
  {
    const int64_t nw = forward_work_size(d);
    std::vector<float> work(size_t(nw + (Dv == Dvp ? 0 : Dk * Dvp)));
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < BH; ++bh) {
      float *Sh = S.data() + bh * Dk * Dv, *Sp = Dv == Dvp ? Sh : work.data() + nw;
      std::fill(work.begin(), work.end(), 0.f);
      if (Sp != Sh)
        for (int64_t i = 0; i < Dk; ++i) std::copy(Sh + i * Dv, Sh + (i + 1) * Dv, Sp + i * Dvp);
      float den;
      forward_head(d, rows_of(d, bh, q.data(), k.data(), v.data(), qd.data(), kd.data()), Sp,
                   z.data() + bh * Dk, eps, out.data() + bh * Dv, &den, 0, work.data());
      if (Sp != Sh)
        for (int64_t i = 0; i < Dk; ++i) std::copy(Sp + i * Dvp, Sp + i * Dvp + Dv, Sh + i * Dv);
    }
  }
  S.bump_version();
  z.bump_version();
  return out;
}

}  // namespace tri
