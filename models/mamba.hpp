// The Mamba mixer (Gu & Dao 2023), with the time-invariant SSMs it grew from as ablations.
//
// Glossary: this file's symbols and the paper's (Algorithm 2, "SSM + Selection (S6)").
//   B, T        batch, time                        paper: B, L
//   D = d_model model width                        paper: D (of the block's input)
//   E = d_inner expand * d_model inner channels   paper: E*D (Figure 3); the SSM runs per channel
//   N = d_state state size per channel            paper: N
//   R = dt_rank rank of Delta's projection        paper: s_Delta = Broadcast_D(Linear_1(x)), R = 1
//   K = d_conv  width of the causal depthwise conv before the SSM (Figure 3, "Conv")
//   A [E, N]    diagonal state matrix, A = -exp(A_log), S4D-Real init A_n = -(n+1)
//   B, C        [B, T, N] input/output matrices, s_B(x) = Linear_N(x), s_C(x) = Linear_N(x)
//   Delta       [B, T, E] step size, tau_Delta(Parameter + s_Delta(x)) with tau_Delta = softplus:
//               Delta = softplus(dt_proj.bias + dt_proj.weight @ x_proj(x)[:R])
//   discretise  Abar = exp(Delta A) (zero-order hold), Bbar = Delta B (Euler, as mamba_ssm)
//   scan        h_t = Abar_t h_{t-1} + Bbar_t x_t,   y_t = C_t . h_t + D x_t
//   gate        y *= silu(z), z the second half of in_proj (Figure 3's right branch)
// The block, reading like the paper:
//   x, z = in_proj(u).split(E)                          [B, T, E] each
//   x = silu(conv1d(x))                                 causal depthwise, kernel K
//   dt, Bm, Cm = x_proj(x).split(R, N, N)
//   dt = dt_proj.weight @ dt                            its bias goes to the scan (delta_bias)
//   y = selective_scan(x, dt, -exp(A_log), Bm, Cm, D, z, dt_proj.bias, softplus)
//   out = out_proj(y)
//
// Ablations (MambaOptions::ssm_selective, a_init), everything outside the SSM unchanged:
//   ssm_selective = true,  a_init = s4d-real   Mamba as above.
//   ssm_selective = false, a_init = s4d-real   S4D-Real: Delta, B, C are learned parameters, no
//       longer functions of x (a linear time-invariant SSM). Delta = softplus(dt_bias) per
//       channel; the same selective_scan with B, C [E, N] and a zero delta plus delta_bias.
//   ssm_selective = false, a_init = hippo-legs  the book's HiPPO-LegS matrix (§9.2) as a fixed
//       dense A [N, N], shared by the channels, bilinear-discretised with a fixed step per channel
//       dt_e log-spaced in [1e-3, 1e-1]: Ad_e = (I - dt_e A/2)^-1 (I + dt_e A/2),
//       Bbar_e = (I - dt_e A/2)^-1 dt_e B_e; h_t = Ad_e h_{t-1} + Bbar_e x_t, y_t = C_e . h_t + D x_t.
//   ssm_selective = false, a_init = s4d-lin    S4D-Lin's complex diagonal A_m = -1/2 + i pi m,
//       m = 0..N/2-1, discretised and scanned as hippo-legs. A complex diagonal SSM is a real
//       block-diagonal one: writing h_m = p + i q, dh_m/dt = A_m h_m + B_m x becomes
//       d/dt [p, q] = [[-1/2, -pi m], [pi m, -1/2]] [p, q] + [Re B_m, Im B_m] x, and the real
//       output Re(C_m h_m) = Re C_m p - Im C_m q is a real readout of [p, q]. So N/2 complex
//       modes are N real coordinates in 2x2 rotation-decay blocks, with learned real B, C [E, N].
//   hippo-legs and s4d-lin need ssm_selective = false (their A is dense and fixed).
//
// Parameters (names and shapes as mamba_ssm's Mamba; the block prefixes "mixer."):
//   all modes        in_proj.weight [2E, D], conv1d.weight [E, 1, K], conv1d.bias [E],
//                    D [E], out_proj.weight [D, E]
//   selective        x_proj.weight [R + 2N, E], dt_proj.weight [E, R], dt_proj.bias [E], A_log [E, N]
//   lti s4d-real     dt_bias [E], B [E, N], C [E, N], A_log [E, N]
//   hippo-legs, s4d-lin   B [E, N], C [E, N]   (A and dt are fixed, not parameters)
// Initialisation (mamba_ssm's Mamba.__init__): PyTorch's defaults for the linears and the conv;
// dt_proj.weight ~ U(-R^-1/2, R^-1/2); dt ~ exp(U(log 1e-3, log 1e-1)) clamped at 1e-4 and
// stored through the inverse softplus, dt_proj.bias = dt + log(-expm1(-dt)) (dt_bias likewise);
// A_log = log(1..N) per channel; D = 1. The time-invariant modes follow S4D: B = 1 (for
// s4d-lin on the real coordinate of each mode, 0 on the imaginary one; hippo-legs uses HiPPO's
// B_n = sqrt(2n+1), which makes h the Legendre coefficients of the input history), and
// C ~ N(0, 1/N), so that C . h has the scale of one state coordinate.
// Not weight-decayed: A_log, D, dt_proj.bias, dt_bias, B (the SSM's own parameters, as S4 and
// mamba_ssm exclude them) and conv1d.bias (biases, as everywhere in the framework).
#pragma once
#include <memory>

#include "framework/core/rng.hpp"
#include "models/config.hpp"
#include "models/mixer.hpp"

namespace tri {

// The family's options (--d-state, --d-conv, --expand, --dt-rank, --ssm-selective, --a-init).
struct MambaOptions : Options {
  int64_t d_state = 16;             // N
  int64_t d_conv = 4;               // K
  int64_t expand = 2;               // E = expand * d_model
  int64_t dt_rank = 0;              // R; 0 means ceil(d_model / 16), as mamba_ssm's "auto"
  bool ssm_selective = true;        // false: dt, B, C learned and input-independent (LTI)
  std::string a_init = "s4d-real";  // s4d-real | s4d-lin | hippo-legs (the last two: LTI only)
  void visit(FieldVisitor& v) override;
  std::unique_ptr<Options> clone() const override { return std::make_unique<MambaOptions>(*this); }
};

// Decoding state of one Mamba mixer: a constant size whatever the position.
struct MambaState : MixerState {
  Tensor conv;  // [B, K-1, E] the last K-1 conv inputs, oldest first (zeros before t = 0)
  Tensor h;     // [B, E, N] the SSM state
  Tensor A;     // -exp(A_log) of the parameters at A_version: computed once per decoding, not per token
  uint64_t A_version = 0;
  int64_t bytes() const override { return int64_t(sizeof(float)) * (conv.numel() + h.numel()); }
};

class MambaMixer : public Mixer {
 public:
  enum class Ssm { selective, lti_diagonal, lti_dense };

  // Checks cfg (ModelConfig::checked): a one-line Error for a bad size, an unknown a_init, or
  // a dense a_init with ssm_selective on.
  MambaMixer(const ModelConfig& cfg, Rng& rng);

  Tensor forward(const Tensor& x, const Tensor& residual = Tensor()) override;
  std::unique_ptr<MixerState> new_state(int64_t batch) const override;
  Tensor step(const Tensor& x, MixerState& state) override;
  int64_t state_bytes(int64_t T) const override;

  Ssm ssm_kind() const { return kind_; }

  const int64_t d_model, d_inner, d_state, d_conv, dt_rank;

  // Parameters (undefined when the mode has none of that name).
  Tensor in_proj_w, conv_w, conv_b, x_proj_w, dt_proj_w, dt_proj_b, dt_bias, B, C, A_log, D,
      out_proj_w;
  // Fixed tensors of the dense modes: A [N, N], dt [E], Ad and Bd [E, N, N].
  Tensor A_dense, dt_fixed, Ad, Bd;

 private:
  Ssm kind_;
  MambaMixer(const ModelConfig& checked, Rng& rng, bool);  // cfg already checked
  // The whole mixer; `st` null: the parallel forward over [B, T, D], else one step.
  Tensor mix(const Tensor& u, MambaState* st, const Tensor& residual);  // + residual when given
  // The SSM on the conv output x and the gate z, [B, T, E]; `st` non-null: one step.
  Tensor ssm(const Tensor& x, const Tensor& z, MambaState* st);
  Tensor decay_rates(MambaState* st) const;  // A = -exp(A_log), cached in a decoding state
  // The causal conv for one step, sliding the window in `st`.
  Tensor conv_step(const Tensor& x, MambaState& st) const;
};

}  // namespace tri
