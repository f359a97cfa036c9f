#include "deltanet.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "framework/core/autograd.hpp"
#include "framework/kernels/delta_rule.hpp"
#include "framework/ops/ops.hpp"
#include "models/family.hpp"

namespace tri {

namespace {

constexpr float kL2Eps = 1e-6f;      // x / sqrt(|x|^2 + eps), as the papers' code (fla's l2_norm)
constexpr double kAMin = 1, kAMax = 16;  // A = exp(A_log) ~ U(1, 16), Mamba 2's range
constexpr double kDtMin = 1e-3, kDtMax = 1e-1, kDtFloor = 1e-4;  // Mamba's dt (mamba.cpp)

// x [..., Dh] / sqrt(|x|^2 + eps) over the last axis: rms_norm(x, eps / Dh) / sqrt(Dh), since
// rms_norm divides by sqrt(|x|^2 / Dh + eps / Dh).
Tensor l2_normalise(const Tensor& x) {
  const int64_t Dh = x.size(-1);
  return mul_scalar(rms_norm(x, Tensor(), kL2Eps / float(Dh)), 1.f / std::sqrt(float(Dh)));
}

const GatedDeltaNetOptions* gates_of(const ModelConfig& cfg) {
  return dynamic_cast<const GatedDeltaNetOptions*>(&cfg.options<DeltaNetOptions>());
}

}  // namespace

struct DeltaNet::State : MixerState {
  int64_t batch = 0;
  Tensor S;            // [B, H, Dh, Dh]: S^T per head, delta_rule's layout
  Tensor q, k, v;      // the short convolutions' last K-1 inputs (undefined without them)
  int64_t bytes() const override {
    int64_t n = S.numel();
    for (const Tensor* w : {&q, &k, &v}) n += w->defined() ? w->numel() : 0;
    return n * int64_t(sizeof(float));
  }
};

void DeltaNetOptions::visit(FieldVisitor& v) {
  v.integer("n-heads", n_heads, {1, 1 << 16}, "heads (must divide d-model)");
  v.integer("conv-size", conv_size, {0, 64},
            "width of the short depthwise causal convolutions on q, k and v (each followed by SiLU); 0 = none, SiLU alone");
  v.boolean("l2-norm", l2_norm, "L2-normalise q and k per head (0: the delta rule's update is not a contraction)");
  v.choice("delta-form", form, {"recurrent", "chunked"},
           "the training kernel: recurrent (fused, state checkpoints; decoding repeats its bits) or chunked (the "
           "UT transform per 64 steps, faster from head width 128 on a CPU, docs/ARCHITECTURE.md; decoding equals it "
           "to float32 rounding)",
           FieldAge::added_later);
}

void GatedDeltaNetOptions::visit(FieldVisitor& v) {
  DeltaNetOptions::visit(v);
  v.boolean("state-gate", state_gate,
            "decay the state by alpha_t = exp(-exp(A_log) softplus(W_a x + dt_bias)) per head (0: alpha = 1, DeltaNet's update)");
  v.boolean("output-gate", output_gate, "multiply the normed readout by SiLU(W_g x) before the output projection");
}

void validate_deltanet(const ModelConfig& cfg) {
  const int64_t H = cfg.options<DeltaNetOptions>().n_heads;
  if (cfg.d_model % H != 0)
    throw Error("--d-model " + std::to_string(cfg.d_model) + " is not divisible by --n-heads " + std::to_string(H));
}

FamilySpec deltanet_family() {
  FamilySpec f;
  f.name = "deltanet";
  f.summary = "DeltaNet, the delta rule S = S (I - beta k k^T) + beta v k^T, Yang et al. 2024";
  f.options = [] { return std::make_unique<DeltaNetOptions>(); };
  f.make = [](const ModelConfig& c, Rng& rng) { return std::make_unique<DeltaNet>(c, rng); };
  f.positions = {"none", "sinusoidal", "learned"};
  f.validate = validate_deltanet;
  f.decode_state = "S per head: H Dh^2 floats per layer, constant in T; with --conv-size K also the last K-1 "
                   "inputs of the q, k and v convolutions";
  f.parity_model = "DeltaNet";
  return f;
}

DeltaNet::DeltaNet(const ModelConfig& c, Rng& rng)
    : D(c.d_model),
      H(c.options<DeltaNetOptions>().n_heads),
      Dh(H > 0 ? c.d_model / H : 0),
      l2_norm(c.options<DeltaNetOptions>().l2_norm),
      state_gate(gates_of(c) && gates_of(c)->state_gate),
      output_gate(gates_of(c) && gates_of(c)->output_gate),
      chunked(c.options<DeltaNetOptions>().form == "chunked"),
      q_proj(D, D, false, rng),
      k_proj(D, D, false, rng),
      v_proj(D, D, false, rng),
      b_proj(D, H, false, rng),
      o_norm(Norm::Kind::rms, Dh),
      out_proj(D, D, false, rng) {
  c.checked();  // a one-line Error for a bad config (the sizes above are then never used)
  add_module("q_proj", q_proj);
  add_module("k_proj", k_proj);
  add_module("v_proj", v_proj);
  if (const int64_t K = c.options<DeltaNetOptions>().conv_size) {
    q_conv = std::make_unique<ShortConv>(D, K, rng);
    k_conv = std::make_unique<ShortConv>(D, K, rng);
    v_conv = std::make_unique<ShortConv>(D, K, rng);
    add_module("q_conv", *q_conv);
    add_module("k_conv", *k_conv);
    add_module("v_conv", *v_conv);
  }
  add_module("b_proj", b_proj);
  if (state_gate) {
    a_proj = std::make_unique<Linear>(D, H, false, rng);
    add_module("a_proj", *a_proj);
    A_log = Tensor::empty(Shape{H});
    dt_bias = Tensor::empty(Shape{H});
    for (int64_t h = 0; h < H; ++h) {
      A_log.data()[h] = float(std::log(kAMin + rng.uniform() * (kAMax - kAMin)));
      double dt = std::exp(rng.uniform() * (std::log(kDtMax) - std::log(kDtMin)) + std::log(kDtMin));
      dt = std::max(dt, kDtFloor);
      dt_bias.data()[h] = float(dt + std::log(-std::expm1(-dt)));  // softplus(dt_bias) = dt
    }
    add_parameter("A_log", A_log, /*decay=*/false);
    add_parameter("dt_bias", dt_bias, /*decay=*/false);
  }
  if (output_gate) {
    g_proj = std::make_unique<Linear>(D, D, false, rng);
    add_module("g_proj", *g_proj);
  }
  add_module("o_norm", o_norm);
  add_module("out_proj", out_proj);
}

Tensor DeltaNet::mix(const Tensor& x, State* st, const Tensor& residual) {
  const int64_t B = x.size(0), T = x.size(1);
  // q, k, v: projection, short convolution (decoding: its step, sliding the window), SiLU.
  auto branch = [&](const Linear& proj, const std::unique_ptr<ShortConv>& conv, Tensor* window) {
    const Tensor p = proj(x);
    if (!conv) return silu(p);
    return st ? silu(conv->step(p, *window)) : causal_conv1d_silu(p, conv->weight, conv->bias);
  };
  const Shape heads{B, T, H, Dh};
  Tensor q = reshape(branch(q_proj, q_conv, st ? &st->q : nullptr), heads);
  Tensor k = reshape(branch(k_proj, k_conv, st ? &st->k : nullptr), heads);
  const Tensor v = reshape(branch(v_proj, v_conv, st ? &st->v : nullptr), heads);
  if (l2_norm) {
    q = l2_normalise(q);
    k = l2_normalise(k);
  }
  const Tensor beta = sigmoid(b_proj(x));  // [B, T, H]
  // g = -exp(A_log) softplus(W_a x + dt_bias): log alpha, <= 0.
  const Tensor g = state_gate ? mul(mul_scalar(exp(A_log), -1.f), softplus(add((*a_proj)(x), dt_bias))) : Tensor();
  const float scale = 1.f / std::sqrt(float(Dh));
  Tensor o = st        ? delta_rule_step(q, k, v, beta, g, st->S, scale)
             : chunked ? delta_rule_chunked(q, k, v, beta, g, scale)
                       : delta_rule(q, k, v, beta, g, scale);
  o = o_norm(o);  // per head, over Dh
  if (output_gate) o = mul(o, silu(reshape((*g_proj)(x), heads)));
  return out_proj(reshape(o, Shape{B, T, D}), residual);
}

Tensor DeltaNet::forward(const Tensor& x, const Tensor& residual) {
  if (x.dim() != 3 || x.size(2) != D)
    throw Error("deltanet: input " + x.shape().str() + " must be [B, T, " + std::to_string(D) + "]");
  return mix(x, nullptr, residual);
}

std::unique_ptr<MixerState> DeltaNet::new_state(int64_t batch) const {
  auto s = std::make_unique<State>();
  s->batch = batch;
  s->S = Tensor::zeros(Shape{batch, H, Dh, Dh});
  if (q_conv) {
    s->q = q_conv->new_window(batch);
    s->k = k_conv->new_window(batch);
    s->v = v_conv->new_window(batch);
  }
  return s;
}

Tensor DeltaNet::step(const Tensor& x, MixerState& state) {
  NoGradGuard no_grad;
  State& s = state_as<State>(state, "deltanet");
  if (x.dim() != 3 || x.size(0) != s.batch || x.size(1) != 1 || x.size(2) != D)
    throw Error("deltanet: step input " + x.shape().str() + " must be [" + std::to_string(s.batch) + ", 1, " +
                std::to_string(D) + "] (batch of the state, one token)");
  return mix(x, &s, Tensor());
}

int64_t DeltaNet::state_bytes(int64_t) const {
  const int64_t windows = q_conv ? (q_conv->width - 1) * 3 * D : 0;
  return (H * Dh * Dh + windows) * int64_t(sizeof(float));
}

}  // namespace tri
