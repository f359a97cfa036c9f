// Binary element-wise ops with numpy broadcasting, and scalar ops.
// Each op is a struct giving f and its partial derivatives; one kernel runs them all.
#include <cmath>

#include "framework/core/autograd.hpp"
#include "framework/runtime/runtime.hpp"
#include "framework/core/broadcast.hpp"
#include "framework/ops/ops.hpp"

namespace tri {

namespace {

// reads_inputs: whether backward needs a and b (add and sub only pass the gradient on).
struct AddOp {
  static constexpr bool reads_inputs = false;
  static float f(float x, float y) { return x + y; }
  static float da(float, float) { return 1.f; }
  static float db(float, float) { return 1.f; }
};
struct SubOp {
  static constexpr bool reads_inputs = false;
  static float f(float x, float y) { return x - y; }
  static float da(float, float) { return 1.f; }
  static float db(float, float) { return -1.f; }
};
struct MulOp {
  static constexpr bool reads_inputs = true;
  static float f(float x, float y) { return x * y; }
  static float da(float, float y) { return y; }
  static float db(float x, float) { return x; }
};
struct DivOp {
  static constexpr bool reads_inputs = true;
  static float f(float x, float y) { return x / y; }
  static float da(float, float y) { return 1.f / y; }
  static float db(float x, float y) { return -x / (y * y); }
};

template <class Op>
Tensor binary(const char* name, const Tensor& a, const Tensor& b) {
  Broadcast bc = broadcast(name, a.shape(), b.shape());
  Tensor out = Tensor::empty(bc.out);
  const float *pa = a.data(), *pb = b.data();
  float* po = out.data();
  const int64_t n = out.numel();
  if (bc.same) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) po[i] = Op::f(pa[i], pb[i]);
  } else {
    for_each_broadcast(bc, [&](int64_t i, int64_t ia, int64_t ib) { po[i] = Op::f(pa[ia], pb[ib]); });
  }
  if (!needs_grad({a, b})) return out;
  std::vector<Tensor> saved;
  if (Op::reads_inputs) saved = {a, b};
  record(name, out, std::move(saved), [a, b, bc, n](const float* g) {
    const float *pa = a.data(), *pb = b.data();
    float* ga = grad_of(a);
    float* gb = grad_of(b);
    if (bc.same) {
      if (ga) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
        for (int64_t i = 0; i < n; ++i) ga[i] += g[i] * Op::da(pa[i], pb[i]);
      }
      if (gb) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
        for (int64_t i = 0; i < n; ++i) gb[i] += g[i] * Op::db(pa[i], pb[i]);
      }
      return;
    }
    // Broadcast dims sum their gradient: serial, since several outputs hit one input.
    for_each_broadcast(bc, [&](int64_t i, int64_t ia, int64_t ib) {
      if (ga) ga[ia] += g[i] * Op::da(pa[ia], pb[ib]);
      if (gb) gb[ib] += g[i] * Op::db(pa[ia], pb[ib]);
    });
  });
  return out;
}

// y = f(x) for a scalar-parameterised f, with dy/dx from x.
template <class F, class DF>
Tensor scalar_op(const char* name, const Tensor& a, F f, DF df) {
  Tensor out = Tensor::empty(a.shape());
  const float* pa = a.data();
  float* po = out.data();
  const int64_t n = a.numel();
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i]);
  if (!needs_grad({a})) return out;
  record(name, out, {a}, [a, df, n](const float* g) {
    const float* pa = a.data();
    float* ga = grad_of(a);
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) ga[i] += g[i] * df(pa[i]);
  });
  return out;
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary<AddOp>("add", a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary<SubOp>("sub", a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary<MulOp>("mul", a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary<DivOp>("div", a, b); }

Tensor add_scalar(const Tensor& a, float s) {
  return scalar_op("add_scalar", a, [s](float x) { return x + s; }, [](float) { return 1.f; });
}
Tensor mul_scalar(const Tensor& a, float s) {
  return scalar_op("mul_scalar", a, [s](float x) { return x * s; }, [s](float) { return s; });
}
Tensor pow_scalar(const Tensor& a, float p) {
  return scalar_op("pow_scalar", a, [p](float x) { return std::pow(x, p); },
                   [p](float x) { return p == 0.f ? 0.f : p * std::pow(x, p - 1.f); });
}

}  // namespace tri
