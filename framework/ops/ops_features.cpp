// Feature maps of linear attention that change the width of a row: the Taylor map.
// The op is a struct giving one row's map and its backward; one kernel runs it over the rows.
#include <cmath>

#include "framework/core/autograd.hpp"
#include "framework/runtime/runtime.hpp"
#include "framework/ops/ops.hpp"

namespace tri {

namespace {

// phi(x) = concat(1, a x, c vec(x x^T)), a = F^(-1/4), c = 1 / (sqrt(2) sqrt(F)).
struct TaylorFeatures {
  int64_t F;
  float a, c;
  explicit TaylorFeatures(int64_t f)
      : F(f), a(float(std::pow(double(f), -0.25))), c(float(1.0 / (std::sqrt(2.0) * std::sqrt(double(f))))) {}
  int64_t width() const { return 1 + F + F * F; }

  void forward(const float* x, float* y) const {
    y[0] = 1.f;
    for (int64_t i = 0; i < F; ++i) y[1 + i] = a * x[i];
    float* outer = y + 1 + F;
    for (int64_t i = 0; i < F; ++i) {
      const float cx = c * x[i];
      for (int64_t j = 0; j < F; ++j) outer[i * F + j] = cx * x[j];
    }
  }
  // dx_i += a g_lin_i + c sum_j (g_ij + g_ji) x_j: x_i enters row i and column i of the outer product.
  void backward(const float* x, const float* g, float* gx) const {
    const float* g_outer = g + 1 + F;
    for (int64_t i = 0; i < F; ++i) {
      float s = 0.f;
      for (int64_t j = 0; j < F; ++j) s += (g_outer[i * F + j] + g_outer[j * F + i]) * x[j];
      gx[i] += a * g[1 + i] + c * s;
    }
  }
};

}  // namespace

Tensor taylor_features(const Tensor& x) {
  if (x.dim() < 1 || x.size(-1) < 1)
    throw Error("taylor_features: input " + x.shape().str() + " must have a feature axis of width >= 1");
  const TaylorFeatures phi(x.size(-1));
  Shape shape = x.shape();
  shape[-1] = phi.width();
  Tensor out = Tensor::empty(shape);
  const int64_t rows = x.numel() / phi.F, W = phi.width();
  const float* px = x.data();
  float* po = out.data();
#pragma omp parallel for schedule(static) if (out.numel() > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) phi.forward(px + r * phi.F, po + r * W);
  if (!needs_grad({x})) return out;
  record("taylor_features", out, {x}, [x, phi, rows, W](const float* g) {
    const float* px = x.data();
    float* gx = grad_of(x);
#pragma omp parallel for schedule(static) if (rows * W > kParallelMin)
    for (int64_t r = 0; r < rows; ++r) phi.backward(px + r * phi.F, g + r * W, gx + r * phi.F);
  });
  return out;
}

}  // namespace tri
