#include "mamba.hpp"

#include <cmath>
#include <string>

#include "framework/core/autograd.hpp"
#include "framework/core/init.hpp"
#include "framework/ops/ops.hpp"
#include "framework/kernels/selective_scan.hpp"
#include "framework/kernels/ssm_dense.hpp"
#include "models/family.hpp"

namespace tri {

namespace {

constexpr double kDtMin = 1e-3, kDtMax = 1e-1, kDtFloor = 1e-4;

MambaMixer::Ssm ssm_kind_of(const MambaOptions& o) {
  if (o.a_init != "s4d-real") return MambaMixer::Ssm::lti_dense;
  return o.ssm_selective ? MambaMixer::Ssm::selective : MambaMixer::Ssm::lti_diagonal;
}

void validate_mamba(const ModelConfig& cfg) {
  const MambaOptions& o = cfg.options<MambaOptions>();
  if (o.a_init != "s4d-real" && o.ssm_selective)
    throw Error("--a-init " + o.a_init + " needs --ssm-selective 0 (its A is dense and fixed; "
                "the selective scan takes a diagonal A: use --a-init s4d-real)");
  if (o.a_init == "s4d-lin" && o.d_state % 2 != 0)
    throw Error("--a-init s4d-lin needs an even --d-state (N/2 complex modes), got " + std::to_string(o.d_state));
}

// mamba_ssm's dt init: log-uniform in [dt_min, dt_max], floored, stored as its inverse softplus
// so that softplus(bias) = dt at the start of training.
Tensor init_dt_bias(int64_t E, Rng& rng) {
  Tensor t = Tensor::empty(Shape{E});
  for (int64_t e = 0; e < E; ++e) {
    double dt = std::exp(rng.uniform() * (std::log(kDtMax) - std::log(kDtMin)) + std::log(kDtMin));
    dt = std::max(dt, kDtFloor);
    t.data()[e] = float(dt + std::log(-std::expm1(-dt)));
  }
  return t;
}

}  // namespace

void MambaOptions::visit(FieldVisitor& v) {
  v.integer("d-state", d_state, {1, 1 << 12}, "SSM state size N");
  v.integer("d-conv", d_conv, {1, 64}, "causal conv width");
  v.integer("expand", expand, {1, 64}, "inner width = expand * d-model");
  v.integer("dt-rank", dt_rank, {1, 1 << 16}, "dt projection rank",
            zero_means("ceil(d-model/16)",
                       [](const FieldLookup& l) { return (l.integer("d-model").value_or(0) + 15) / 16; }));
  v.boolean("ssm-selective", ssm_selective, "input-dependent dt, B, C (0: time-invariant, S4D-like)");
  v.choice("a-init", a_init, {"s4d-real", "s4d-lin", "hippo-legs"},
           "A init s4d-real, s4d-lin or hippo-legs (the last two need --ssm-selective 0)");
}

FamilySpec mamba_family() {
  FamilySpec f;
  f.name = "mamba";
  f.summary = "selective state-space model, Gu & Dao 2023";
  f.options = [] { return std::make_unique<MambaOptions>(); };
  f.make = [](const ModelConfig& c, Rng& rng) { return std::make_unique<MambaMixer>(c, rng); };
  f.norm = Norm::Kind::rms;
  f.first_norm = "norm";  // mamba_ssm's name
  f.positions = {"none"};
  f.validate = validate_mamba;
  f.decode_state = "(conv window, h): (K-1) E + E N floats per layer, constant in T";
  f.parity_model = "MambaMixer";
  return f;
}

// The checked config lives until the delegated constructor returns.
MambaMixer::MambaMixer(const ModelConfig& cfg, Rng& rng) : MambaMixer(cfg.checked(), rng, true) {}

MambaMixer::MambaMixer(const ModelConfig& cfg, Rng& rng, bool /*checked*/)
    : d_model(cfg.d_model),
      d_inner(cfg.options<MambaOptions>().expand * cfg.d_model),
      d_state(cfg.options<MambaOptions>().d_state),
      d_conv(cfg.options<MambaOptions>().d_conv),
      dt_rank(cfg.options<MambaOptions>().dt_rank),
      kind_(ssm_kind_of(cfg.options<MambaOptions>())) {
  const MambaOptions& o = cfg.options<MambaOptions>();
  const int64_t Dm = d_model, E = d_inner, N = d_state, K = d_conv, R = dt_rank;
  in_proj_w = init_linear_weight(2 * E, Dm, rng);
  add_parameter("in_proj.weight", in_proj_w);
  const float cb = 1.f / std::sqrt(float(K));  // Conv1d's default: fan_in = K for a depthwise conv
  conv_w = init_uniform(Shape{E, 1, K}, rng, -cb, cb);
  conv_b = init_uniform(Shape{E}, rng, -cb, cb);
  add_parameter("conv1d.weight", conv_w);
  add_parameter("conv1d.bias", conv_b, false);

  if (kind_ == Ssm::selective) {
    x_proj_w = init_linear_weight(R + 2 * N, E, rng);
    const float s = 1.f / std::sqrt(float(R));  // dt_init "random", dt_scale 1
    dt_proj_w = init_uniform(Shape{E, R}, rng, -s, s);
    dt_proj_b = init_dt_bias(E, rng);
    add_parameter("x_proj.weight", x_proj_w);
    add_parameter("dt_proj.weight", dt_proj_w);
    add_parameter("dt_proj.bias", dt_proj_b, false);
  } else {
    if (kind_ == Ssm::lti_diagonal) {
      dt_bias = init_dt_bias(E, rng);
      add_parameter("dt_bias", dt_bias, false);
    }
    B = Tensor::full(Shape{E, N}, 1.f);
    if (o.a_init == "s4d-lin")
      for (int64_t e = 0; e < E; ++e)
        for (int64_t n = 1; n < N; n += 2) B.data()[e * N + n] = 0.f;  // imaginary parts
    if (o.a_init == "hippo-legs")
      for (int64_t e = 0; e < E; ++e)
        for (int64_t n = 0; n < N; ++n) B.data()[e * N + n] = std::sqrt(float(2 * n + 1));
    C = init_normal(Shape{E, N}, rng, 0.f, 1.f / std::sqrt(float(N)));
    add_parameter("B", B, false);
    add_parameter("C", C);
  }

  if (kind_ != Ssm::lti_dense) {
    A_log = Tensor::empty(Shape{E, N});
    for (int64_t e = 0; e < E; ++e)
      for (int64_t n = 0; n < N; ++n) A_log.data()[e * N + n] = std::log(float(n + 1));
    add_parameter("A_log", A_log, false);
  } else {
    A_dense = o.a_init == "hippo-legs" ? hippo_legs(N) : s4d_lin_matrix(N);
    dt_fixed = Tensor::empty(Shape{E});
    for (int64_t e = 0; e < E; ++e) {
      const double f = E > 1 ? double(e) / double(E - 1) : 0.0;
      dt_fixed.data()[e] = float(std::exp(std::log(kDtMin) + f * (std::log(kDtMax) - std::log(kDtMin))));
    }
    bilinear_discretise(A_dense, dt_fixed, Ad, Bd);
  }
  D = Tensor::full(Shape{E}, 1.f);
  add_parameter("D", D, false);
  out_proj_w = init_linear_weight(Dm, E, rng);
  add_parameter("out_proj.weight", out_proj_w);
}

Tensor MambaMixer::forward(const Tensor& x, const Tensor& residual) {
  if (x.dim() != 3 || x.size(2) != d_model)
    throw Error("mamba: input " + x.shape().str() + " must be [B, T, " + std::to_string(d_model) + "]");
  return mix(x, nullptr, residual);
}

Tensor MambaMixer::step(const Tensor& x, MixerState& state) {
  MambaState* st = &state_as<MambaState>(state, "mamba");
  const int64_t batch = st->h.size(0);
  if (x.dim() != 3 || x.size(0) != batch || x.size(1) != 1 || x.size(2) != d_model)
    throw Error("mamba: step input " + x.shape().str() + " must be [" + std::to_string(batch) +
                ", 1, " + std::to_string(d_model) + "]");
  NoGradGuard no_grad;
  return mix(x, st, Tensor());
}

Tensor MambaMixer::mix(const Tensor& u, MambaState* st, const Tensor& residual) {
  const int64_t E = d_inner;
  Tensor xz = linear(u, in_proj_w);  // [B, T, 2E]
  Tensor x = slice(xz, -1, 0, E), z = slice(xz, -1, E, 2 * E);
  x = st ? silu(conv_step(x, *st)) : causal_conv1d_silu(x, conv_w, conv_b);
  return linear(ssm(x, z, st), out_proj_w, Tensor(), residual);
}

Tensor MambaMixer::decay_rates(MambaState* st) const {
  if (!st) return mul_scalar(exp(A_log), -1.f);  // [E, N], negative: a decaying state
  if (!st->A.defined() || st->A_version != A_log.version()) {
    st->A = mul_scalar(exp(A_log), -1.f);
    st->A_version = A_log.version();
  }
  return st->A;
}

Tensor MambaMixer::ssm(const Tensor& x, const Tensor& z, MambaState* st) {
  Tensor* h = st ? &st->h : nullptr;
  if (kind_ == Ssm::lti_dense) {
    // Bbar_e = Bd_e @ B_e: [E, N, N] x [E, N, 1]; differentiable in B only.
    const Tensor Bbar = reshape(matmul(Bd, reshape(B, Shape{d_inner, d_state, 1})),
                                Shape{d_inner, d_state});
    const Tensor y = h ? dense_lti_step(x, Ad, Bbar, C, *h) : dense_lti_scan(x, Ad, Bbar, C);
    return (y + x * D) * silu(z);
  }
  const Tensor A = decay_rates(st);
  Tensor delta, Bm, Cm, bias;
  if (kind_ == Ssm::selective) {
    const int64_t R = dt_rank, N = d_state;
    const Tensor x_dbl = linear(x, x_proj_w);  // [B, T, R + 2N]
    delta = linear(slice(x_dbl, -1, 0, R), dt_proj_w);
    Bm = slice(x_dbl, -1, R, R + N);
    Cm = slice(x_dbl, -1, R + N, R + 2 * N);
    bias = dt_proj_b;
  } else {  // time-invariant: Delta = softplus(0 + dt_bias)
    delta = Tensor::zeros(x.shape());
    Bm = B;
    Cm = C;
    bias = dt_bias;
  }
  return h ? selective_scan_step(x, delta, A, Bm, Cm, D, z, bias, true, *h)
           : selective_scan(x, delta, A, Bm, Cm, D, z, bias, true);
}

Tensor MambaMixer::conv_step(const Tensor& x, MambaState& st) const {
  return causal_conv1d_step(x, conv_w, conv_b, st.conv);
}

std::unique_ptr<MixerState> MambaMixer::new_state(int64_t batch) const {
  auto st = std::make_unique<MambaState>();
  st->conv = Tensor::zeros(Shape{batch, d_conv - 1, d_inner});
  st->h = Tensor::zeros(Shape{batch, d_inner, d_state});
  return st;
}

int64_t MambaMixer::state_bytes(int64_t /*T*/) const {
  return int64_t(sizeof(float)) * ((d_conv - 1) * d_inner + d_inner * d_state);
}

}  // namespace tri
