#include "short_conv.hpp"

#include <cmath>

#include "framework/core/init.hpp"
#include "framework/ops/ops.hpp"

namespace tri {

ShortConv::ShortConv(int64_t c, int64_t k, Rng& rng) : channels(c), width(k) {
  const float bound = 1.f / std::sqrt(float(k));  // Conv1d's default: fan_in = K for a depthwise conv
  weight = init_uniform(Shape{c, 1, k}, rng, -bound, bound);
  bias = init_uniform(Shape{c}, rng, -bound, bound);
  add_parameter("weight", weight);
  add_parameter("bias", bias, /*decay=*/false);
}

Tensor ShortConv::operator()(const Tensor& x) const { return causal_conv1d(x, weight, bias); }

Tensor ShortConv::new_window(int64_t batch) const { return Tensor::zeros(Shape{batch, width - 1, channels}); }

Tensor ShortConv::step(const Tensor& x, Tensor& window) const { return causal_conv1d_step(x, weight, bias, window); }

}  // namespace tri
