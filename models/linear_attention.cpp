#include "linear_attention.hpp"

#include "framework/core/autograd.hpp"
#include "framework/kernels/linear_attention.hpp"
#include "framework/ops/positions.hpp"
#include "models/family.hpp"

namespace tri {

namespace {
struct LinearAttentionState : MixerState {
  int64_t batch = 0, pos = 0;
  Tensor S, z;  // [B, H, Dh, Dh], [B, H, Dh]
  int64_t bytes() const override { return (S.numel() + z.numel()) * int64_t(sizeof(float)); }
};

FeatureMap feature_map_of(const std::string& name) {  // a value the option's choice allowed
  if (name == "elu") return FeatureMap::elu_plus_one;
  if (name == "relu") return FeatureMap::relu;
  return FeatureMap::identity;
}
}  // namespace

void LinearAttentionOptions::visit(FieldVisitor& v) {
  HeadOptions::visit(v);
  v.choice("feature-map", feature_map, {"elu", "relu", "identity"}, "phi: elu (elu+1), relu or identity");
}

FamilySpec linear_attention_family() {
  FamilySpec f;
  f.name = "linear";
  f.summary = "causal linear attention, Katharopoulos et al. 2020";
  f.options = [] { return std::make_unique<LinearAttentionOptions>(); };
  f.make = [](const ModelConfig& c, Rng& rng) { return std::make_unique<LinearAttention>(c, rng); };
  f.positions = {"none", "sinusoidal", "learned", "rope"};
  f.validate = validate_heads;
  f.decode_state = "(S, z) per head: H (Dh^2 + Dh) floats per layer, constant in T";
  f.parity_model = "LinearAttention";
  return f;
}

LinearAttention::LinearAttention(const ModelConfig& c, Rng& rng)
    : HeadMixer(c.checked(), rng), feature_map_(feature_map_of(cfg.options<LinearAttentionOptions>().feature_map)) {}

Tensor LinearAttention::phi(const Tensor& x) const {
  switch (feature_map_) {
    case FeatureMap::elu_plus_one: return elu_plus_one(x);
    case FeatureMap::relu: return relu(x);
    case FeatureMap::identity: break;
  }
  return x;
}

Tensor LinearAttention::forward(const Tensor& x, const Tensor& residual) {
  Tensor q = split_heads(q_proj(x));  // [B, T, H, Dh]
  Tensor k = split_heads(k_proj(x));
  Tensor v = split_heads(v_proj(x));
  if (cfg.pos != "rope")  // phi(q), phi(k) inside the kernel: recomputed in backward, not stored
    return out_proj(merge_heads(linear_attention(q, k, v, feature_map_)), residual);
  q = phi(q);
  k = phi(k);
  return out_proj(merge_heads(linear_attention(rope(q, 0), rope(k, 0), v, q, k)), residual);
}

std::unique_ptr<MixerState> LinearAttention::new_state(int64_t batch) const {
  auto s = std::make_unique<LinearAttentionState>();
  s->batch = batch;
  s->S = Tensor::zeros(Shape{batch, H, Dh, Dh});
  s->z = Tensor::zeros(Shape{batch, H, Dh});
  return s;
}

Tensor LinearAttention::step(const Tensor& x, MixerState& state) {
  NoGradGuard no_grad;
  LinearAttentionState& s = state_as<LinearAttentionState>(state, "linear attention");
  check_step_input(x, s.batch);
  Tensor q = phi(split_heads(q_proj(x)));  // [B, 1, H, Dh]
  Tensor k = phi(split_heads(k_proj(x)));
  Tensor v = split_heads(v_proj(x));
  Tensor o = cfg.pos == "rope"
                 ? linear_attention_step(rope(q, s.pos), rope(k, s.pos), v, s.S, s.z, q, k)
                 : linear_attention_step(q, k, v, s.S, s.z);
  s.pos += 1;
  return out_proj(merge_heads(o));
}

int64_t LinearAttention::state_bytes(int64_t) const {
  return H * (Dh * Dh + Dh) * int64_t(sizeof(float));
}

}  // namespace tri
