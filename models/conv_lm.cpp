#include "conv_lm.hpp"

#include <cmath>

#include "framework/init.hpp"

namespace tri {

ConvLM::ConvLM(const ConvLMConfig& c, uint64_t seed) : cfg(c) {
  Rng rng(seed);
  const int64_t D = c.d_model, V = c.vocab, F = 4 * D, K = c.d_conv;
  embedding = init_normal(Shape{V, D}, rng, 0.f, 1.f);
  norm1_w = Tensor::full(Shape{D}, 1.f);
  norm1_b = Tensor::zeros(Shape{D});
  const float cb = 1.f / std::sqrt(float(K));  // Conv1d default: fan_in = K for depthwise
  conv_w = init_uniform(Shape{D, 1, K}, rng, -cb, cb);
  conv_b = init_uniform(Shape{D}, rng, -cb, cb);
  norm2_w = Tensor::full(Shape{D}, 1.f);
  norm2_b = Tensor::zeros(Shape{D});
  fc1_w = init_linear_weight(F, D, rng);
  fc1_b = init_linear_bias(F, D, rng);
  fc2_w = init_linear_weight(D, F, rng);
  fc2_b = init_linear_bias(D, F, rng);
  norm_f_w = Tensor::full(Shape{D}, 1.f);
  norm_f_b = Tensor::zeros(Shape{D});
  head_w = init_linear_weight(V, D, rng);

  add_parameter("backbone.embedding.weight", embedding, false);
  add_parameter("backbone.layers.0.norm1.weight", norm1_w, false);
  add_parameter("backbone.layers.0.norm1.bias", norm1_b, false);
  add_parameter("backbone.layers.0.mixer.conv1d.weight", conv_w);
  add_parameter("backbone.layers.0.mixer.conv1d.bias", conv_b, false);
  add_parameter("backbone.layers.0.norm2.weight", norm2_w, false);
  add_parameter("backbone.layers.0.norm2.bias", norm2_b, false);
  add_parameter("backbone.layers.0.mlp.fc1.weight", fc1_w);
  add_parameter("backbone.layers.0.mlp.fc1.bias", fc1_b, false);
  add_parameter("backbone.layers.0.mlp.fc2.weight", fc2_w);
  add_parameter("backbone.layers.0.mlp.fc2.bias", fc2_b, false);
  add_parameter("backbone.norm_f.weight", norm_f_w, false);
  add_parameter("backbone.norm_f.bias", norm_f_b, false);
  add_parameter("lm_head.weight", head_w);
}

Tensor ConvLM::forward(const IntTensor& ids) {
  Tensor x = tri::embedding(embedding, ids);
  x = x + causal_conv1d(layer_norm(x, norm1_w, norm1_b), conv_w, conv_b);
  x = x + linear(gelu(linear(layer_norm(x, norm2_w, norm2_b), fc1_w, fc1_b)), fc2_w, fc2_b);
  return linear(layer_norm(x, norm_f_w, norm_f_b), head_w);
}

}  // namespace tri
