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
