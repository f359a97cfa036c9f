#include "linear_attention.hpp"

#include "framework/core/autograd.hpp"
#include "framework/kernels/linear_attention.hpp"
#include "framework/ops/positions.hpp"
#include "models/family.hpp"
#include "models/position_encodings.hpp"

namespace tri {

namespace {
struct LinearAttentionState : MixerState {
  int64_t batch = 0, pos = 0;
  Tensor S, z;         // [B, H, Dk, Dh], [B, H, Dk]
  QkvWindows windows;  // the short convolutions' last inputs (--short-conv)
  int64_t bytes() const override {
    return (S.numel() + z.numel()) * int64_t(sizeof(float)) + windows.bytes();
  }
};

FeatureMap feature_map_of(const std::string& name) {  // a value the option's choice allowed
  if (name == "elu") return FeatureMap::elu_plus_one;
  if (name == "relu") return FeatureMap::relu;
  return FeatureMap::identity;
}

// F, the per-head width of q and k (0 before the config is checked: no heads to divide by).
int64_t feature_dim_of(const ModelConfig& cfg) {
  const LinearAttentionOptions& o = cfg.options<LinearAttentionOptions>();
  if (o.feature_dim) return o.feature_dim;
  return o.n_heads > 0 ? cfg.d_model / o.n_heads : 0;
}

void validate_linear_attention(const ModelConfig& cfg) {
  validate_heads(cfg);
  const LinearAttentionOptions& o = cfg.options<LinearAttentionOptions>();
  if (o.feature_map == "taylor" && cfg.position().rotary)
    throw Error("--pos " + cfg.pos + " does not apply to --feature-map taylor (allowed with taylor: --pos none, sinusoidal or learned)");
  if (cfg.position().rotary && feature_dim_of(cfg) % 2 != 0)
    throw Error("--pos " + cfg.pos + " needs an even --feature-dim, got " + std::to_string(o.feature_dim));
}
}  // namespace

void LinearAttentionOptions::visit(FieldVisitor& v) {
  HeadOptions::visit(v);
  v.choice("feature-map", feature_map, {"elu", "relu", "identity", "taylor"},
           "phi: elu (elu+1), relu, identity or taylor (Based's 1 + x + x^2/2 over feature-dim F: width 1 + F + F^2)");
  v.integer("feature-dim", feature_dim, {0, 1024},
            "per-head width F of q and k (their projections give n-heads x F); 0 = the head width d-model / n-heads",
            {}, FieldAge::added_later);
}

FamilySpec linear_attention_family() {
  FamilySpec f;
  f.name = "linear";
  f.summary = "causal linear attention, Katharopoulos et al. 2020 (Based's Taylor map and short convolutions as options)";
  f.options = [] { return std::make_unique<LinearAttentionOptions>(); };
  f.make = [](const ModelConfig& c, Rng& rng) { return std::make_unique<LinearAttention>(c, rng); };
  f.positions = {"none", "sinusoidal", "learned", "rope"};
  f.validate = validate_linear_attention;
  f.decode_state =
      "(S, z) per head: H (Dk Dh + Dk) floats per layer, constant in T; Dk = --feature-dim F (default Dh), or "
      "1 + F + F^2 with --feature-map taylor (d 64, 1 head, F 16: 273 x 65 floats, 71 kB per layer); with "
      "--short-conv K also the last K-1 inputs of the q, k and v convolutions";
  f.parity_model = "LinearAttention";
  return f;
}

LinearAttention::LinearAttention(const ModelConfig& c, Rng& rng)
    : HeadMixer(c.checked(), rng, c.options<LinearAttentionOptions>().n_heads * feature_dim_of(c)),
      taylor_(cfg.options<LinearAttentionOptions>().feature_map == "taylor"),
      feature_map_(feature_map_of(cfg.options<LinearAttentionOptions>().feature_map)),
      feature_width_(taylor_ ? 1 + feature_dim_of(cfg) + feature_dim_of(cfg) * feature_dim_of(cfg)
                             : feature_dim_of(cfg)) {}

Tensor LinearAttention::phi(const Tensor& x) const {
  if (taylor_) return taylor_features(x);
  switch (feature_map_) {
    case FeatureMap::elu_plus_one: return elu_plus_one(x);
    case FeatureMap::relu: return relu(x);
    case FeatureMap::identity: break;
  }
  return x;
}

Tensor LinearAttention::forward(const Tensor& x, const Tensor& residual) {
  auto [q, k, v] = project(x);  // q, k [B, T, H, F]; v [B, T, H, Dh]
  if (cfg.position().rotary) {  // never with taylor (validate_linear_attention)
    q = phi(q);
    k = phi(k);
    return out_proj(merge_heads(linear_attention(rope(q, 0), rope(k, 0), v, q, k)), residual);
  }
  if (taylor_)  // 1 + F + F^2 features per head: made (and kept for backward) outside the kernel
    return out_proj(merge_heads(linear_attention(phi(q), phi(k), v)), residual);
  // phi(q), phi(k) inside the kernel: recomputed in backward, not stored
  return out_proj(merge_heads(linear_attention(q, k, v, feature_map_)), residual);
}

std::unique_ptr<MixerState> LinearAttention::new_state(int64_t batch) const {
  auto s = std::make_unique<LinearAttentionState>();
  s->batch = batch;
  s->S = Tensor::zeros(Shape{batch, H, feature_width_, Dh});
  s->z = Tensor::zeros(Shape{batch, H, feature_width_});
  s->windows = new_windows(batch);
  return s;
}

Tensor LinearAttention::step(const Tensor& x, MixerState& state) {
  NoGradGuard no_grad;
  LinearAttentionState& s = state_as<LinearAttentionState>(state, "linear attention");
  check_step_input(x, s.batch);
  auto [q, k, v] = project_step(x, s.windows);  // [B, 1, H, *]
  q = phi(q);
  k = phi(k);
  Tensor o = cfg.position().rotary
                 ? linear_attention_step(rope(q, s.pos), rope(k, s.pos), v, s.S, s.z, q, k)
                 : linear_attention_step(q, k, v, s.S, s.z);
  s.pos += 1;
  return out_proj(merge_heads(o));
}

int64_t LinearAttention::state_bytes(int64_t) const {
  return H * (feature_width_ * Dh + feature_width_) * int64_t(sizeof(float)) + windows_bytes();
}

}  // namespace tri
