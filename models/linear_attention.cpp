#include "linear_attention.hpp"

#include "framework/attention.hpp"
#include "framework/autograd.hpp"
#include "framework/linear_attention.hpp"

namespace tri {

namespace {
struct LinearAttentionState : MixerState {
  int64_t batch = 0, pos = 0;
  Tensor S, z;  // [B, H, Dh, Dh], [B, H, Dh]
  int64_t bytes() const override { return (S.numel() + z.numel()) * int64_t(sizeof(float)); }
};
}  // namespace

LinearAttention::LinearAttention(const ModelConfig& c, Rng& rng) : HeadMixer(c, rng) {}

Tensor LinearAttention::phi(const Tensor& x) const {
  if (cfg.feature_map == "elu") return add_scalar(elu(x), 1.f);
  if (cfg.feature_map == "relu") return relu(x);
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
  LinearAttentionState& s = dynamic_cast<LinearAttentionState&>(state);
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
