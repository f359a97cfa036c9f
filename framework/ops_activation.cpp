// Element-wise unary ops. Each is one line of forward and one of derivative, written next to
// each other; the derivative reads the input x or the output y, whichever is cheaper.
// Transcendentals come from vec_math.hpp (1-2 ulp, no libm call), so every loop vectorises.
#include <cmath>

#include "autograd.hpp"
#include "ops.hpp"
#include "vec_math.hpp"

namespace tri {

namespace {
constexpr int64_t kParallelMin = 1 << 15;

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
    float* gx = grad_of(x);
#pragma omp parallel for simd schedule(static) firstprivate(fn) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) gx[i] += g[i] * fn.df(px[i], py[i]);
  });
  return out;
}

struct Gelu {  // x * Phi(x)
  float f(float x) const { return gelu_value(x); }
  float df(float x, float) const { return gelu_derivative(x); }
};
struct Silu {  // x * sigmoid(x)
  float f(float x) const { return x / (1.f + exp_full(-x)); }
  float df(float x, float) const {
    float s = 1.f / (1.f + exp_full(-x));
    return s * (1.f + x * (1.f - s));
  }
};
struct Elu {
  float alpha;
  float f(float x) const { return x > 0.f ? x : alpha * expm1_approx(x); }
  float df(float x, float y) const { return x > 0.f ? 1.f : y + alpha; }
};
struct EluPlusOne {  // elu(x) + 1 = e^x for x <= 0: one exp, no cancellation in expm1 + 1
  float f(float x) const { return x > 0.f ? x + 1.f : exp_full(x); }
  float df(float x, float y) const { return x > 0.f ? 1.f : y; }
};
struct Softplus {  // PyTorch's threshold 20: linear above it
  float f(float x) const { return softplus_approx(x); }
  float df(float x, float) const { return x > 20.f ? 1.f : 1.f / (1.f + exp_full(-x)); }
};
struct Exp {
  float f(float x) const { return exp_full(x); }
  float df(float, float y) const { return y; }
};
struct Log {
  float f(float x) const { return std::log(x); }
  float df(float x, float) const { return 1.f / x; }
};
struct Sigmoid {
  float f(float x) const { return 1.f / (1.f + exp_full(-x)); }
  float df(float, float y) const { return y * (1.f - y); }
};
struct Relu {
  float f(float x) const { return x > 0.f ? x : 0.f; }
  float df(float x, float) const { return x > 0.f ? 1.f : 0.f; }
};
struct Tanh {
  float f(float x) const { return tanh_approx(x); }
  float df(float, float y) const { return 1.f - y * y; }
};
}  // namespace

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
