// Parameter initialisation from the framework's deterministic Rng (same values everywhere).
#pragma once
#include <cmath>

#include "framework/core/rng.hpp"
#include "framework/core/tensor.hpp"

namespace tri {

inline Tensor init_uniform(const Shape& s, Rng& rng, float lo, float hi) {
  Tensor t = Tensor::empty(s);
  float* p = t.data();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = lo + float(rng.uniform()) * (hi - lo);
  return t;
}

inline Tensor init_normal(const Shape& s, Rng& rng, float mean, float std) {
  Tensor t = Tensor::empty(s);
  float* p = t.data();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = mean + std * float(rng.normal());
  return t;
}

// PyTorch's nn.Linear default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight [out, in] and bias.
inline Tensor init_linear_weight(int64_t out, int64_t in, Rng& rng) {
  const float b = 1.f / std::sqrt(float(in));
  return init_uniform(Shape{out, in}, rng, -b, b);
}
inline Tensor init_linear_bias(int64_t out, int64_t in, Rng& rng) {
  const float b = 1.f / std::sqrt(float(in));
  return init_uniform(Shape{out}, rng, -b, b);
}

}  // namespace tri
