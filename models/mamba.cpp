#include "mamba.hpp"

#include <cmath>
#include <numbers>
#include <string>

#include "framework/autograd.hpp"
#include "framework/init.hpp"
#include "framework/ops.hpp"
#include "framework/selective_scan.hpp"

namespace tri {

namespace {

constexpr double kDtMin = 1e-3, kDtMax = 1e-1, kDtFloor = 1e-4;

int64_t positive(const char* name, int64_t v) {
  if (v < 1) throw Error(std::string("mamba: ") + name + " = " + std::to_string(v) + " (allowed: >= 1)");
  return v;
}

MambaMixer::Ssm ssm_kind_of(const ModelConfig& cfg) {
  const std::string& a = cfg.a_init;
  if (a != "s4d-real" && a != "s4d-lin" && a != "hippo-legs")
    throw Error("mamba: a_init '" + a + "' unknown (allowed: s4d-real, s4d-lin, hippo-legs)");
  if (a == "s4d-real")
    return cfg.ssm_selective ? MambaMixer::Ssm::selective : MambaMixer::Ssm::lti_diagonal;
  if (cfg.ssm_selective)
    throw Error("mamba: a_init = " + a + " needs ssm_selective = false (its A is dense and fixed; "
                "the selective scan takes a diagonal A: use a_init = s4d-real)");
  if (a == "s4d-lin" && cfg.d_state % 2 != 0)
    throw Error("mamba: a_init = s4d-lin needs an even d_state (N/2 complex modes), got " +
                std::to_string(cfg.d_state));
  return MambaMixer::Ssm::lti_dense;
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

// S4D-Lin as N/2 real 2x2 blocks [[-1/2, -pi m], [pi m, -1/2]] (see the header).
Tensor s4d_lin_matrix(int64_t N) {
  Tensor A = Tensor::zeros(Shape{N, N});
  float* a = A.data();
  for (int64_t m = 0; m < N / 2; ++m) {
    const int64_t p = 2 * m, q = 2 * m + 1;
    const float w = float(std::numbers::pi * double(m));
    a[p * N + p] = -0.5f;
    a[q * N + q] = -0.5f;
    a[p * N + q] = -w;
    a[q * N + p] = w;
  }
  return A;
}

}  // namespace

MambaMixer::MambaMixer(const ModelConfig& cfg, Rng& rng)
    : d_model(positive("d_model", cfg.d_model)),
      d_inner(positive("expand", cfg.expand) * d_model),
      d_state(positive("d_state", cfg.d_state)),
      d_conv(positive("d_conv", cfg.d_conv)),
      dt_rank(cfg.dt_rank >= 0 ? cfg.resolved_dt_rank() : positive("dt_rank", cfg.dt_rank)),
      kind_(ssm_kind_of(cfg)) {
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
    if (cfg.a_init == "s4d-lin")
      for (int64_t e = 0; e < E; ++e)
        for (int64_t n = 1; n < N; n += 2) B.data()[e * N + n] = 0.f;  // imaginary parts
    if (cfg.a_init == "hippo-legs")
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
    A_dense = cfg.a_init == "hippo-legs" ? hippo_legs(N) : s4d_lin_matrix(N);
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

Tensor MambaMixer::forward(const Tensor& x) {
  if (x.dim() != 3 || x.size(2) != d_model)
    throw Error("mamba: input " + x.shape().str() + " must be [B, T, " + std::to_string(d_model) + "]");
  return mix(x, nullptr);
}

Tensor MambaMixer::step(const Tensor& x, MixerState& state) {
  auto* st = dynamic_cast<MambaState*>(&state);
  if (!st) throw Error("mamba: step was given another mixer's state");
  const int64_t batch = st->h.size(0);
  if (x.dim() != 3 || x.size(0) != batch || x.size(1) != 1 || x.size(2) != d_model)
    throw Error("mamba: step input " + x.shape().str() + " must be [" + std::to_string(batch) +
                ", 1, " + std::to_string(d_model) + "]");
  NoGradGuard no_grad;
  return mix(x, st);
}

Tensor MambaMixer::mix(const Tensor& u, MambaState* st) {
  const int64_t E = d_inner;
  Tensor xz = linear(u, in_proj_w);  // [B, T, 2E]
  Tensor x = slice(xz, -1, 0, E), z = slice(xz, -1, E, 2 * E);
  x = silu(st ? conv_step(x, *st) : causal_conv1d(x, conv_w, conv_b));
  return linear(ssm(x, z, st ? &st->h : nullptr), out_proj_w);
}

Tensor MambaMixer::ssm(const Tensor& x, const Tensor& z, Tensor* h) {
  if (kind_ == Ssm::lti_dense) {
    // Bbar_e = Bd_e @ B_e: [E, N, N] x [E, N, 1]; differentiable in B only.
    const Tensor Bbar = reshape(matmul(Bd, reshape(B, Shape{d_inner, d_state, 1})),
                                Shape{d_inner, d_state});
    const Tensor y = h ? dense_lti_step(x, Ad, Bbar, C, *h) : dense_lti_scan(x, Ad, Bbar, C);
    return (y + x * D) * silu(z);
  }
  const Tensor A = mul_scalar(exp(A_log), -1.f);  // [E, N], negative: a decaying state
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
  const int64_t batch = x.size(0), E = d_inner, K = d_conv;
  Tensor out = Tensor::empty(Shape{batch, 1, E});
  const float *w = conv_w.data(), *cb = conv_b.data();
  for (int64_t b = 0; b < batch; ++b) {
    float* window = st.conv.data() + b * (K - 1) * E;  // oldest first
    const float* xr = x.data() + b * E;
    float* yr = out.data() + b * E;
    // Same order of additions as causal_conv1d: bias, then taps oldest to newest.
    for (int64_t e = 0; e < E; ++e) yr[e] = cb[e];
    for (int64_t k = 0; k < K - 1; ++k)
      for (int64_t e = 0; e < E; ++e) yr[e] += w[e * K + k] * window[k * E + e];
    for (int64_t e = 0; e < E; ++e) yr[e] += w[e * K + K - 1] * xr[e];
    for (int64_t k = 0; k + 1 < K - 1; ++k)  // slide the window by one
      for (int64_t e = 0; e < E; ++e) window[k * E + e] = window[(k + 1) * E + e];
    if (K > 1)
      for (int64_t e = 0; e < E; ++e) window[(K - 2) * E + e] = xr[e];
  }
  st.conv.bump_version();
  return out;
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
