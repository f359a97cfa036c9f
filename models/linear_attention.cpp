#include "linear_attention.hpp"

#include "framework/autograd.hpp"
#include "framework/linear_attention.hpp"
#include "framework/positions.hpp"
#include "models/family.hpp"

namespace tri {

namespace {
struct LinearAttentionState : MixerState {
  int64_t batch = 0, pos = 0;
  Tensor S, z;  // [B, H, Dh, Dh], [B, H, Dh]
  int64_t bytes() const override { return (S.numel() + z.numel()) * int64_t(sizeof(float)); }
};
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
    : HeadMixer(c.checked(), rng), feature_map_(cfg.options<LinearAttentionOptions>().feature_map) {}

Tensor LinearAttention::phi(const Tensor& x) const {
  if (feature_map_ == "elu") return elu_plus_one(x);
  if (feature_map_ == "relu") return relu(x);
  return x;  // identity
}

Tensor LinearAttention::forward(const Tensor& x) {
  Tensor q = phi(split_heads(q_proj(x)));  // [B, T, H, Dh]
  Tensor k = phi(split_heads(k_proj(x)));
  Tensor v = split_heads(v_proj(x));
  Tensor o = cfg.pos == "rope" ? linear_attention(rope(q, 0), rope(k, 0), v, q, k)
                               : linear_attention(q, k, v);
  return out_proj(merge_heads(o));
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
