// Element-wise unary ops: the functions of activation_fns.hpp applied to a tensor, forward and
// backward.
#include <cmath>

#include "framework/ops/activation_fns.hpp"
#include "framework/runtime/runtime.hpp"
#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"

namespace tri {

namespace {

// y = F::f(x); dy/dx = F::df(x, y).
template <class F>
Tensor unary(const char* name, const Tensor& x, F fn) {
  Tensor out = Tensor::empty(x.shape());
  const float* px = x.data();
  float* py = out.data();
  const int64_t n = x.numel();
#pragma omp parallel for simd schedule(static) firstprivate(fn) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) py[i] = fn.f(px[i]);
  if (!needs_grad({x})) return out;
  record(name, out, {x, out}, [x, out, fn, n](const float* g) {
    const float *px = x.data(), *py = out.data();
    bool fresh;
    float* gx = grad_for_write(x, &fresh);
    set_or_add_grad(gx, fresh, n, [px, py, g, fn](int64_t i) { return g[i] * fn.df(px[i], py[i]); });
  });
  return out;
}

}  // namespace

using namespace activation;

// y = a s with s = silu(x). Backward as mul's and silu's in turn: d a = g s, d s = 0 + g a
// (mul's gradient into silu's fresh output: -0 becomes +0), d x = d s silu'(x); s recomputed.
Tensor mul_silu(const Tensor& a, const Tensor& x) {
  if (a.shape() != x.shape())
    throw Error("mul_silu: a " + a.shape().str() + " and x " + x.shape().str() + " must have one shape");
  Tensor out = Tensor::empty(x.shape());
  const float *pa = a.data(), *px = x.data();
  float* py = out.data();
  const int64_t n = x.numel();
  const Silu fn;
#pragma omp parallel for simd schedule(static) firstprivate(fn) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) py[i] = pa[i] * fn.f(px[i]);
  if (!needs_grad({a, x})) return out;
  record("mul_silu", out, {a, x}, [a, x, fn, n](const float* g) {
    const float *pa = a.data(), *px = x.data();
    bool a_fresh, x_fresh;
    float* ga = grad_for_write(a, &a_fresh);
    float* gx = grad_for_write(x, &x_fresh);
    if (ga && gx && a_fresh && x_fresh) {  // both in one pass, each element's operations as below
#pragma omp parallel for simd schedule(static) firstprivate(fn, pa, px, g, ga, gx) if (n > kParallelSimdMin)
      for (int64_t i = 0; i < n; ++i) {
        ga[i] = 0.f + g[i] * fn.f(px[i]);
        const float ds = 0.f + g[i] * pa[i];
        gx[i] = 0.f + ds * fn.df(px[i], 0.f);
      }
      return;
    }
    if (ga) set_or_add_grad(ga, a_fresh, n, [pa, px, g, fn](int64_t i) { return g[i] * fn.f(px[i]); });
    if (gx)
      set_or_add_grad(gx, x_fresh, n, [pa, px, g, fn](int64_t i) {
        const float ds = 0.f + g[i] * pa[i];
        return ds * fn.df(px[i], 0.f);
      });
  });
  return out;
}

Tensor gelu(const Tensor& x) { return unary("gelu", x, Gelu{}); }
Tensor silu(const Tensor& x) { return unary("silu", x, Silu{}); }
Tensor elu(const Tensor& x, float alpha) { return unary("elu", x, Elu{alpha}); }
Tensor elu_plus_one(const Tensor& x) { return unary("elu_plus_one", x, EluPlusOne{}); }
Tensor softplus(const Tensor& x) { return unary("softplus", x, Softplus{}); }
Tensor exp(const Tensor& x) { return unary("exp", x, Exp{}); }
Tensor log(const Tensor& x) { return unary("log", x, Log{}); }
Tensor sigmoid(const Tensor& x) { return unary("sigmoid", x, Sigmoid{}); }
Tensor relu(const Tensor& x) { return unary("relu", x, Relu{}); }
Tensor tanh(const Tensor& x) { return unary("tanh", x, Tanh{}); }

}  // namespace tri
