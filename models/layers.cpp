#include "layers.hpp"

#include "framework/core/init.hpp"
#include "models/position_encodings.hpp"

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
  return kind == Kind::layer ? layer_norm(x, weight, bias, kEps) : rms_norm(x, weight, kEps);
}

Mlp::Mlp(int64_t d, Rng& rng) : fc1(d, 4 * d, true, rng), fc2(4 * d, d, true, rng) {
  add_module("fc1", fc1);
  add_module("fc2", fc2);
}

void HeadOptions::visit(FieldVisitor& v) {
  v.integer("n-heads", n_heads, {1, 1 << 16}, "heads (must divide d-model)");
  v.boolean("bias", bias, "biases on the q/k/v/out projections");
  v.fixed("rope-style", rope_style, "half", "RoPE rotates the pairs (i, i + head_dim/2), GPT-NeoX's rotate_half");
  v.integer("short-conv", short_conv, {0, 64},
            "width of Based's depthwise causal convolutions on q, k and v after their projections; 0 = none", {},
            FieldAge::added_later);
}

void validate_heads(const ModelConfig& cfg) {
  const int64_t H = cfg.options<HeadOptions>().n_heads;
  if (cfg.d_model % H != 0)
    throw Error("--d-model " + std::to_string(cfg.d_model) + " is not divisible by --n-heads " +
                std::to_string(H));
  if (cfg.position().rotary && (cfg.d_model / H) % 2 != 0)
    throw Error("--pos " + cfg.pos + " needs an even head width, got d-model / n-heads = " +
                std::to_string(cfg.d_model / H));
}

int64_t QkvWindows::bytes() const {
  int64_t n = 0;
  for (const Tensor* w : {&q, &k, &v}) n += w->defined() ? w->numel() : 0;
  return n * int64_t(sizeof(float));
}

// The convolutions draw their initial weights after every projection's, so that a model
// without them starts from the same numbers as before they existed; they are registered
// before out_proj, in the order of the computation (the PyTorch twin's state_dict order).
HeadMixer::HeadMixer(const ModelConfig& c, Rng& rng, int64_t qk_width)
    : cfg(c),
      H(c.options<HeadOptions>().n_heads),
      Dh(c.d_model / H),
      q_proj(c.d_model, qk_width ? qk_width : c.d_model, c.options<HeadOptions>().bias, rng),
      k_proj(c.d_model, qk_width ? qk_width : c.d_model, c.options<HeadOptions>().bias, rng),
      v_proj(c.d_model, c.d_model, c.options<HeadOptions>().bias, rng),
      out_proj(c.d_model, c.d_model, c.options<HeadOptions>().bias, rng) {
  add_module("q_proj", q_proj);
  add_module("k_proj", k_proj);
  add_module("v_proj", v_proj);
  if (const int64_t K = c.options<HeadOptions>().short_conv) {
    const int64_t qk = q_proj.weight.size(0);
    q_conv = std::make_unique<ShortConv>(qk, K, rng);
    k_conv = std::make_unique<ShortConv>(qk, K, rng);
    v_conv = std::make_unique<ShortConv>(c.d_model, K, rng);
    add_module("q_conv", *q_conv);
    add_module("k_conv", *k_conv);
    add_module("v_conv", *v_conv);
  }
  add_module("out_proj", out_proj);
}

HeadMixer::Qkv HeadMixer::project(const Tensor& x) const {
  Tensor q = q_proj(x), k = k_proj(x), v = v_proj(x);  // [B, T, width]
  if (q_conv) {
    q = (*q_conv)(q);
    k = (*k_conv)(k);
    v = (*v_conv)(v);
  }
  return {split_heads(q), split_heads(k), split_heads(v)};
}

HeadMixer::Qkv HeadMixer::project_step(const Tensor& x, QkvWindows& w) const {
  Tensor q = q_proj(x), k = k_proj(x), v = v_proj(x);  // [B, 1, width]
  if (q_conv) {
    q = q_conv->step(q, w.q);
    k = k_conv->step(k, w.k);
    v = v_conv->step(v, w.v);
  }
  return {split_heads(q), split_heads(k), split_heads(v)};
}

QkvWindows HeadMixer::new_windows(int64_t batch) const {
  if (!q_conv) return {};
  return {q_conv->new_window(batch), k_conv->new_window(batch), v_conv->new_window(batch)};
}

int64_t HeadMixer::windows_bytes() const {
  if (!q_conv) return 0;
  return (q_conv->width - 1) * (q_conv->channels + k_conv->channels + v_conv->channels) * int64_t(sizeof(float));
}

Tensor HeadMixer::split_heads(const Tensor& x) const {
  return reshape(x, Shape{x.size(0), x.size(1), H, x.size(2) / H});
}

Tensor HeadMixer::merge_heads(const Tensor& x) const {
  return reshape(x, Shape{x.size(0), x.size(1), x.size(2) * x.size(3)});
}

void HeadMixer::check_step_input(const Tensor& x, int64_t batch) const {
  if (x.dim() != 3 || x.size(0) != batch || x.size(1) != 1 || x.size(2) != cfg.d_model)
    throw Error("mixer step: input " + x.shape().str() + " must be [" + std::to_string(batch) +
                ", 1, " + std::to_string(cfg.d_model) + "] (batch of the state, one token)");
}

}  // namespace tri
