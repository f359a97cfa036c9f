#include "mamba2.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/core/init.hpp"
#include "framework/kernels/ssd_scan.hpp"
#include "framework/ops/activation_fns.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/rows.hpp"
#include "models/family.hpp"

namespace tri {

namespace {

constexpr double kAMin = 1, kAMax = 16;                          // A = exp(A_log) ~ U(1, 16)
constexpr double kDtMin = 1e-3, kDtMax = 1e-1, kDtFloor = 1e-4;  // Mamba's dt (mamba.cpp)
constexpr float kNormEps = 1e-5f;                                // mamba_ssm's RMSNormGated

const Mamba2Options& opts(const ModelConfig& c) { return c.options<Mamba2Options>(); }

}  // namespace

struct Mamba2Mixer::State : MixerState {
  int64_t batch = 0;
  Tensor conv;  // [B, K-1, E + 2GN]: the convolution's last K-1 inputs
  Tensor ssm;   // [B, H, P, N]
  Tensor neg_A;  // -exp(A_log) of the parameters at A_version: once per decoding, not per token (as Mamba's)
  uint64_t A_version = 0;
  std::vector<float> row;  // one row of the convolution's output
  int64_t bytes() const override { return (conv.numel() + ssm.numel()) * int64_t(sizeof(float)); }
};

void Mamba2Options::visit(FieldVisitor& v) {
  v.integer("state-size", state_size, {1, 1 << 12}, "SSD state size N per head (Mamba 2; Mamba's is --d-state)");
  v.integer("head-dim", head_dim, {1, 1 << 16}, "SSD head width P (heads = expand * d-model / head-dim)");
  v.integer("n-groups", n_groups, {1, 1 << 16}, "groups of heads sharing B and C (must divide the heads)");
  v.integer("d-conv", d_conv, {1, 64}, "causal conv width");
  v.integer("expand", expand, {1, 64}, "inner width = expand * d-model");
}

void validate_mamba2(const ModelConfig& cfg) {
  const Mamba2Options& o = opts(cfg);
  const int64_t E = o.expand * cfg.d_model;
  if (E % o.head_dim != 0)
    throw Error("--head-dim " + std::to_string(o.head_dim) + " does not divide the inner width expand * d-model = " +
                std::to_string(E));
  const int64_t H = E / o.head_dim;
  if (H % o.n_groups != 0)
    throw Error("--n-groups " + std::to_string(o.n_groups) + " does not divide the " + std::to_string(H) +
                " heads (expand * d-model / head-dim)");
}

FamilySpec mamba2_family() {
  FamilySpec f;
  f.name = "mamba2";
  f.summary = "Mamba 2, the SSD layer: a scalar decay per head, H = exp(dt A) H + dt x B^T, Dao & Gu 2024";
  f.options = [] { return std::make_unique<Mamba2Options>(); };
  f.make = [](const ModelConfig& c, Rng& rng) { return std::make_unique<Mamba2Mixer>(c, rng); };
  f.norm = Norm::Kind::rms;
  f.first_norm = "norm";  // mamba_ssm's name
  f.positions = {"none"};
  f.validate = validate_mamba2;
  f.decode_state = "(conv window, H per head): (K-1)(E + 2GN) + E N floats per layer, constant in T";
  f.parity_model = "Mamba2Mixer";
  return f;
}

Mamba2Mixer::Mamba2Mixer(const ModelConfig& c, Rng& rng)
    : D(c.d_model),
      E(opts(c).expand * c.d_model),
      P(opts(c).head_dim),
      H(P > 0 ? E / P : 0),
      N(opts(c).state_size),
      G(opts(c).n_groups),
      K(opts(c).d_conv),
      in_proj_w((c.checked(), init_linear_weight(2 * E + 2 * G * N + H, D, rng))),
      conv1d(E + 2 * G * N, K, rng) {
  add_parameter("in_proj.weight", in_proj_w);
  add_module("conv1d", conv1d);
  dt_bias = Tensor::empty(Shape{H});
  A_log = Tensor::empty(Shape{H});
  for (int64_t h = 0; h < H; ++h) {
    double dt = std::exp(rng.uniform() * (std::log(kDtMax) - std::log(kDtMin)) + std::log(kDtMin));
    dt = std::max(dt, kDtFloor);
    dt_bias.data()[h] = float(dt + std::log(-std::expm1(-dt)));  // softplus(dt_bias) = dt
  }
  for (int64_t h = 0; h < H; ++h) A_log.data()[h] = float(std::log(kAMin + rng.uniform() * (kAMax - kAMin)));
  add_parameter("dt_bias", dt_bias, /*decay=*/false);
  add_parameter("A_log", A_log, /*decay=*/false);
  D_skip = Tensor::full(Shape{H}, 1.f);
  add_parameter("D", D_skip, /*decay=*/false);
  norm_w = Tensor::full(Shape{E}, 1.f);
  add_parameter("norm.weight", norm_w, /*decay=*/false);
  out_proj_w = init_linear_weight(D, E, rng);
  add_parameter("out_proj.weight", out_proj_w);
}

Tensor Mamba2Mixer::mix(const Tensor& u, const Tensor& residual) {
  const int64_t B = u.size(0), T = u.size(1), GN = G * N;
  // The projection's parts z, x, B, C, dt, each its own GEMM's output (no copies).
  const std::vector<Tensor> parts = linear_parts(u, in_proj_w, {E, E, GN, GN, H});
  const Tensor &z = parts[0], &dt_raw = parts[4];
  // The convolution is depthwise: x, B and C each through their own channels' taps, with the
  // bits of one call over xBC.
  auto conv = [&](const Tensor& part, int64_t from, int64_t width) {
    return causal_conv1d_silu(part, slice(conv1d.weight, 0, from, from + width), slice(conv1d.bias, 0, from, from + width));
  };
  const Tensor x = reshape(conv(parts[1], 0, E), Shape{B, T, H, P});
  const Tensor Bm = reshape(conv(parts[2], E, GN), Shape{B, T, G, N});
  const Tensor Cm = reshape(conv(parts[3], E + GN, GN), Shape{B, T, G, N});
  const Tensor dt = softplus(add(dt_raw, dt_bias));  // [B, T, H]
  const Tensor A = mul_scalar(exp(A_log), -1.f);
  Tensor y = ssd_scan(x, dt, A, Bm, Cm, D_skip);
  y = mul_silu(reshape(y, Shape{B, T, E}), z);  // the gate, then the norm
  if (G == 1) {
    y = rms_norm(y, norm_w, kNormEps);
  } else {  // each group's E / G channels on their own
    y = reshape(rms_norm(reshape(y, Shape{B, T, G, E / G}), Tensor(), kNormEps), Shape{B, T, E});
    y = mul(y, norm_w);
  }
  return linear(y, out_proj_w, Tensor(), residual);
}

Tensor Mamba2Mixer::forward(const Tensor& x, const Tensor& residual) {
  if (x.dim() != 3 || x.size(2) != D)
    throw Error("mamba2: input " + x.shape().str() + " must be [B, T, " + std::to_string(D) + "]");
  return mix(x, residual);
}

// The decoding step: the forward's ops on one token, fused. The input projection, one pass for
// the convolution, SiLU and dt (the ops' bits: their row arithmetic is shared,
// framework/ops/rows.hpp), the scan's step, one pass for the gate and the norm, the output
// projection: 5 calls for the forward's 18 ops, which at B 1 cost more than their arithmetic.
std::unique_ptr<MixerState> Mamba2Mixer::new_state(int64_t batch) const {
  auto s = std::make_unique<State>();
  s->batch = batch;
  s->conv = conv1d.new_window(batch);
  s->ssm = Tensor::zeros(Shape{batch, H, P, N});
  s->row.resize(size_t(E + 2 * G * N));
  return s;
}

Tensor Mamba2Mixer::step(const Tensor& u, MixerState& state) {
  NoGradGuard no_grad;
  State& s = state_as<State>(state, "mamba2");
  if (u.dim() != 3 || u.size(0) != s.batch || u.size(1) != 1 || u.size(2) != D)
    throw Error("mamba2: step input " + u.shape().str() + " must be [" + std::to_string(s.batch) + ", 1, " +
                std::to_string(D) + "] (batch of the state, one token)");
  if (!s.neg_A.defined() || s.A_version != A_log.version()) {
    s.neg_A = mul_scalar(exp(A_log), -1.f);
    s.A_version = A_log.version();
  }
  const int64_t B = s.batch, GN = G * N, C = E + 2 * GN, n_in = 2 * E + 2 * GN + H;
  const Tensor zxbcdt = linear(u, in_proj_w);  // [B, 1, n_in]: z, x, B, C, dt
  Tensor x = Tensor::empty(Shape{B, 1, H, P}), dt = Tensor::empty(Shape{B, 1, H});
  Tensor Bm = Tensor::empty(Shape{B, 1, G, N}), Cm = Tensor::empty(Shape{B, 1, G, N});
  const activation::Silu silu_fn;
  for (int64_t b = 0; b < B; ++b) {
    const float* pr = zxbcdt.data() + b * n_in;
    float* xbc = s.row.data();
    rows::conv_step_row(pr + E, C, conv1d.weight.data(), conv1d.bias.data(), K, s.conv.data() + b * (K - 1) * C, xbc);
    for (int64_t c = 0; c < E; ++c) x.data()[b * E + c] = silu_fn.f(xbc[c]);
    for (int64_t c = 0; c < GN; ++c) {
      Bm.data()[b * GN + c] = silu_fn.f(xbc[E + c]);
      Cm.data()[b * GN + c] = silu_fn.f(xbc[E + GN + c]);
    }
    for (int64_t h = 0; h < H; ++h) dt.data()[b * H + h] = softplus_approx(pr[2 * E + 2 * GN + h] + dt_bias.data()[h]);
  }
  s.conv.bump_version();
  Tensor y = ssd_scan_step(x, dt, s.neg_A, Bm, Cm, D_skip, s.ssm);  // [B, 1, H, P]
  const int64_t width = E / G;  // the gate, then the norm over each group (G = 1: rms_norm's weight, else a mul)
  for (int64_t r = 0; r < B * G; ++r) {
    float* yr = y.data() + r * width;
    const float* zr = zxbcdt.data() + (r / G) * n_in + (r % G) * width;
    for (int64_t j = 0; j < width; ++j) yr[j] = yr[j] * silu_fn.f(zr[j]);
    rows::rms_norm_row(yr, width, kNormEps, norm_w.data() + (r % G) * width, yr);
  }
  return linear(reshape(y, Shape{B, 1, E}), out_proj_w);
}

int64_t Mamba2Mixer::state_bytes(int64_t) const {
  return ((K - 1) * (E + 2 * G * N) + H * P * N) * int64_t(sizeof(float));
}

}  // namespace tri
