#include "layers.hpp"

#include "framework/core/init.hpp"

namespace tri {

Linear::Linear(int64_t in, int64_t out, bool with_bias, Rng& rng) {
  weight = init_linear_weight(out, in, rng);
  add_parameter("weight", weight);
  if (with_bias) {
    bias = init_linear_bias(out, in, rng);
    add_parameter("bias", bias, /*decay=*/false);
  }
}

Norm::Norm(Kind k, int64_t d) : kind(k) {
  weight = Tensor::full(Shape{d}, 1.f);
  add_parameter("weight", weight, false);
  if (kind == Kind::layer) {
    bias = Tensor::zeros(Shape{d});
    add_parameter("bias", bias, false);
  }
}

Tensor Norm::operator()(const Tensor& x) const {
  return kind == Kind::layer ? layer_norm(x, weight, bias, 1e-5f) : rms_norm(x, weight, 1e-5f);
}

Mlp::Mlp(int64_t d, Rng& rng) : fc1(d, 4 * d, true, rng), fc2(4 * d, d, true, rng) {
  add_module("fc1", fc1);
  add_module("fc2", fc2);
}

void HeadOptions::visit(FieldVisitor& v) {
  v.integer("n-heads", n_heads, {1, 1 << 16}, "heads (must divide d-model)");
  v.boolean("bias", bias, "biases on the q/k/v/out projections");
  v.fixed("rope-style", rope_style, "half", "RoPE rotates the pairs (i, i + head_dim/2), GPT-NeoX's rotate_half");
}

void validate_heads(const ModelConfig& cfg) {
  const int64_t H = cfg.options<HeadOptions>().n_heads;
  if (cfg.d_model % H != 0)
    throw Error("--d-model " + std::to_string(cfg.d_model) + " is not divisible by --n-heads " +
                std::to_string(H));
  if (cfg.pos == "rope" && (cfg.d_model / H) % 2 != 0)
    throw Error("--pos rope needs an even head width, got d-model / n-heads = " +
                std::to_string(cfg.d_model / H));
}

HeadMixer::HeadMixer(const ModelConfig& c, Rng& rng)
    : cfg(c),
      H(c.options<HeadOptions>().n_heads),
      Dh(c.d_model / H),
      q_proj(c.d_model, c.d_model, c.options<HeadOptions>().bias, rng),
      k_proj(c.d_model, c.d_model, c.options<HeadOptions>().bias, rng),
      v_proj(c.d_model, c.d_model, c.options<HeadOptions>().bias, rng),
      out_proj(c.d_model, c.d_model, c.options<HeadOptions>().bias, rng) {
  add_module("q_proj", q_proj);
  add_module("k_proj", k_proj);
  add_module("v_proj", v_proj);
  add_module("out_proj", out_proj);
}

Tensor HeadMixer::split_heads(const Tensor& x) const {
  return reshape(x, Shape{x.size(0), x.size(1), H, Dh});
}

Tensor HeadMixer::merge_heads(const Tensor& x) const {
  return reshape(x, Shape{x.size(0), x.size(1), H * Dh});
}

void HeadMixer::check_step_input(const Tensor& x, int64_t batch) const {
  if (x.dim() != 3 || x.size(0) != batch || x.size(1) != 1 || x.size(2) != cfg.d_model)
    throw Error("mixer step: input " + x.shape().str() + " must be [" + std::to_string(batch) +
                ", 1, " + std::to_string(cfg.d_model) + "] (batch of the state, one token)");
}

}  // namespace tri
