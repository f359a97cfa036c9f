#include "deltanet.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/kernels/delta_rule.hpp"
#include "framework/ops/activation_fns.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/rows.hpp"
#include "models/family.hpp"

namespace tri {

namespace {

constexpr float kL2Eps = 1e-6f;      // x / sqrt(|x|^2 + eps), as the papers' code (fla's l2_norm)
constexpr double kAMin = 1, kAMax = 16;  // A = exp(A_log) ~ U(1, 16), Mamba 2's range
constexpr double kDtMin = 1e-3, kDtMax = 1e-1, kDtFloor = 1e-4;  // Mamba's dt (mamba.cpp)

const GatedDeltaNetOptions* gates_of(const ModelConfig& cfg) {
  return dynamic_cast<const GatedDeltaNetOptions*>(&cfg.options<DeltaNetOptions>());
}

}  // namespace

struct DeltaNet::State : MixerState {
  int64_t batch = 0;
  Tensor S;       // [B, H, Dh, Dh]: S^T per head, delta_rule's layout
  Tensor window;  // [B, K-1, 3D]: the q, k and v convolutions' last K-1 inputs side by side (undefined without them)
  // The step's parameters side by side, so that a token takes one GEMV and one convolution step;
  // built on the first step and again whenever a parameter has been written since.
  Tensor w_in;            // [3D + H (+ H) (+ D), D]: the q, k, v, beta (, a) (, output gate) projections
  Tensor conv_w, conv_b;  // [3D, 1, K], [3D]: the q, k and v convolutions
  Tensor neg_A;           // -exp(A_log) [H]
  uint64_t version = 0;   // the parameters' versions summed when they were built
  std::vector<float> row;  // one row of the convolutions' output
  int64_t bytes() const override {
    return (S.numel() + (window.defined() ? window.numel() : 0)) * int64_t(sizeof(float));
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

Tensor DeltaNet::mix(const Tensor& x, const Tensor& residual) {
  const int64_t B = x.size(0), T = x.size(1);
  // q, k, v: projection, short convolution, SiLU.
  auto branch = [&](const Linear& proj, const std::unique_ptr<ShortConv>& conv) {
    const Tensor p = proj(x);
    return conv ? causal_conv1d_silu(p, conv->weight, conv->bias) : silu(p);
  };
  const Shape heads{B, T, H, Dh};
  Tensor q = reshape(branch(q_proj, q_conv), heads);
  Tensor k = reshape(branch(k_proj, k_conv), heads);
  const Tensor v = reshape(branch(v_proj, v_conv), heads);
  if (l2_norm) {
    q = tri::l2_norm(q, kL2Eps);  // the op (l2_norm alone is the switch)
    k = tri::l2_norm(k, kL2Eps);
  }
  const Tensor beta = sigmoid(b_proj(x));  // [B, T, H]
  // g = -exp(A_log) softplus(W_a x + dt_bias): log alpha, <= 0.
  const Tensor g = state_gate ? mul(mul_scalar(exp(A_log), -1.f), softplus(add((*a_proj)(x), dt_bias))) : Tensor();
  const float scale = 1.f / std::sqrt(float(Dh));
  Tensor o = chunked ? delta_rule_chunked(q, k, v, beta, g, scale) : delta_rule(q, k, v, beta, g, scale);
  o = o_norm(o);  // per head, over Dh
  if (output_gate) o = mul_silu(o, reshape((*g_proj)(x), heads));
  return out_proj(reshape(o, Shape{B, T, D}), residual);
}

Tensor DeltaNet::forward(const Tensor& x, const Tensor& residual) {
  if (x.dim() != 3 || x.size(2) != D)
    throw Error("deltanet: input " + x.shape().str() + " must be [B, T, " + std::to_string(D) + "]");
  return mix(x, residual);
}

// The decoding step: the forward's ops on one token, fused. One GEMV for all the projections,
// one pass for the convolutions, SiLU, the L2 norms and the gates (the ops' bits: their row
// arithmetic is shared, framework/ops/rows.hpp), the delta rule's step, one pass for the norm and
// the output gate, the output projection: 5 calls for the forward's 26 ops, which at B 1 cost
// more than their arithmetic.
std::unique_ptr<MixerState> DeltaNet::new_state(int64_t batch) const {
  auto s = std::make_unique<State>();
  s->batch = batch;
  s->S = Tensor::zeros(Shape{batch, H, Dh, Dh});
  if (q_conv) s->window = Tensor::zeros(Shape{batch, q_conv->width - 1, 3 * D});
  s->row.resize(size_t(3 * D));
  return s;
}

uint64_t DeltaNet::params_version() const {
  uint64_t v = 0;
  for (const Tensor* t : {&q_proj.weight, &k_proj.weight, &v_proj.weight, &b_proj.weight, &A_log, &dt_bias})
    v += t->defined() ? t->version() : 0;
  for (const std::unique_ptr<Linear>* l : {&a_proj, &g_proj}) v += *l ? (*l)->weight.version() : 0;
  for (const std::unique_ptr<ShortConv>* c : {&q_conv, &k_conv, &v_conv})
    v += *c ? (*c)->weight.version() + (*c)->bias.version() : 0;
  return v;  // versions only grow: the sum changes whenever one does
}

void DeltaNet::join_params(State& s) const {
  const uint64_t v = params_version();
  if (s.w_in.defined() && s.version == v) return;
  std::vector<Tensor> w{q_proj.weight, k_proj.weight, v_proj.weight, b_proj.weight};
  if (state_gate) w.push_back(a_proj->weight);
  if (output_gate) w.push_back(g_proj->weight);
  s.w_in = concat(w, 0);
  if (q_conv) {
    s.conv_w = concat({q_conv->weight, k_conv->weight, v_conv->weight}, 0);
    s.conv_b = concat({q_conv->bias, k_conv->bias, v_conv->bias}, 0);
  }
  if (state_gate) s.neg_A = mul_scalar(exp(A_log), -1.f);
  s.version = v;
}

Tensor DeltaNet::step(const Tensor& x, MixerState& state) {
  NoGradGuard no_grad;
  State& s = state_as<State>(state, "deltanet");
  if (x.dim() != 3 || x.size(0) != s.batch || x.size(1) != 1 || x.size(2) != D)
    throw Error("deltanet: step input " + x.shape().str() + " must be [" + std::to_string(s.batch) + ", 1, " +
                std::to_string(D) + "] (batch of the state, one token)");
  join_params(s);
  const int64_t B = s.batch, n_in = s.w_in.size(0);
  const Tensor p = linear(x, s.w_in);  // [B, 1, n_in]: q, k, v, beta (, a) (, output gate)
  const Shape heads{B, 1, H, Dh};
  Tensor q = Tensor::empty(heads), k = Tensor::empty(heads), v = Tensor::empty(heads);
  Tensor beta = Tensor::empty(Shape{B, 1, H}), g = state_gate ? Tensor::empty(Shape{B, 1, H}) : Tensor();
  const activation::Silu silu_fn;
  const float l2_eps = kL2Eps / float(Dh), l2_scale = 1.f / std::sqrt(float(Dh));
  for (int64_t b = 0; b < B; ++b) {
    const float* pr = p.data() + b * n_in;
    const float* qkv = pr;
    if (q_conv) {
      rows::conv_step_row(pr, 3 * D, s.conv_w.data(), s.conv_b.data(), q_conv->width,
                          s.window.data() + b * (q_conv->width - 1) * 3 * D, s.row.data());
      qkv = s.row.data();
    }
    float *qr = q.data() + b * D, *kr = k.data() + b * D, *vr = v.data() + b * D;
    for (int64_t j = 0; j < D; ++j) {
      qr[j] = silu_fn.f(qkv[j]);
      kr[j] = silu_fn.f(qkv[D + j]);
      vr[j] = silu_fn.f(qkv[2 * D + j]);
    }
    for (int64_t h = 0; l2_norm && h < H; ++h)  // l2_norm's bits: rms_norm, then the scale
      for (float* r : {qr + h * Dh, kr + h * Dh}) {
        rows::rms_norm_row(r, Dh, l2_eps, nullptr, r);
        for (int64_t j = 0; j < Dh; ++j) r[j] = r[j] * l2_scale;
      }
    for (int64_t h = 0; h < H; ++h) {
      beta.data()[b * H + h] = activation::Sigmoid{}.f(pr[3 * D + h]);
      if (state_gate) g.data()[b * H + h] = s.neg_A.data()[h] * softplus_approx(pr[3 * D + H + h] + dt_bias.data()[h]);
    }
  }
  if (q_conv) s.window.bump_version();
  Tensor o = delta_rule_step(q, k, v, beta, g, s.S, 1.f / std::sqrt(float(Dh)));
  const int64_t gate_at = 3 * D + (state_gate ? 2 : 1) * H;
  for (int64_t r = 0; r < B * H; ++r) {  // o_norm, then the output gate
    float* orow = o.data() + r * Dh;
    rows::rms_norm_row(orow, Dh, Norm::kEps, o_norm.weight.data(), orow);
    const float* gr = p.data() + (r / H) * n_in + gate_at + (r % H) * Dh;
    for (int64_t j = 0; output_gate && j < Dh; ++j) orow[j] = orow[j] * silu_fn.f(gr[j]);
  }
  return out_proj(reshape(o, Shape{B, 1, D}));
}

int64_t DeltaNet::state_bytes(int64_t) const {
  const int64_t windows = q_conv ? (q_conv->width - 1) * 3 * D : 0;
  return (H * Dh * Dh + windows) * int64_t(sizeof(float));
}

}  // namespace tri
