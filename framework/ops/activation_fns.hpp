// The element-wise functions behind the unary ops (ops_activation.cpp), shared with kernels that
// apply one inside a fused op (linear attention's feature map). Each is one line of forward f
// and one of derivative df, written next to each other; df reads the input x or the output y,
// whichever is cheaper. Transcendentals come from vec_math.hpp (1-2 ulp, no libm call), so
// every loop over them vectorises.
#pragma once
#include <cmath>

#include "framework/simd/vec_math.hpp"

namespace tri::activation {

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

}  // namespace tri::activation
