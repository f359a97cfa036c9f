// DeltaNet (Yang, Wang, Shen, Panda & Kim 2024, "Parallelizing Linear Transformers with the
// Delta Rule over Sequence Length", on the delta rule of Schlag, Irie & Schmidhuber 2021) and
// Gated DeltaNet (Yang, Kautz & Hatamizadeh 2025, "Gated Delta Networks"): one mixer, two
// families, `deltanet` (deltanet.cpp) and `gated_deltanet` (gated_deltanet.cpp).
// Glossary (paper -> code):
//   x_t                             x [B, T, D]
//   q_t, k_t, v_t = W_Q x_t, ...    q_proj, k_proj, v_proj ([D, D] each, no biases), split into H
//                                   heads of width Dh = D / H (d_k = d_v = Dh)
//   ShortConv, then SiLU            q_conv, k_conv, v_conv: depthwise causal convolutions of width
//                                   K (--conv-size; 0: none, SiLU alone), models/short_conv.hpp
//   L2Norm(q_t), L2Norm(k_t)        per head, x / sqrt(|x|^2 + 1e-6) (--l2-norm). Without it the
//                                   update's eigenvalue along k, 1 - beta |k|^2, is unbounded
//   beta_t = sigmoid(W_beta x_t)    b_proj [H, D]: one writing strength per head
//   alpha_t = exp(g_t),             gated_deltanet (--state-gate): a_proj [H, D], A_log [H] and
//   g_t = -exp(A_log) softplus(W_a x_t + dt_bias)   dt_bias [H], Mamba 2's decay per head
//   S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T
//   o_t = S_t q_t / sqrt(d_k)       delta_rule(q, k, v, beta, g, 1/sqrt(Dh)) (framework/kernels/)
//   RMSNorm(o_t)                    o_norm: per head, its weight [Dh] shared by the heads
//   o_t * SiLU(W_g x_t)             gated_deltanet (--output-gate): g_proj [D, D]
//   W_O o                           out_proj
// Recurrent state: S per head, H Dh^2 floats per layer, and with the short convolutions the last
// K-1 inputs of each, 3 (K-1) D floats: constant in T.
// Initialisation: PyTorch's defaults for the linears and the convolutions; A = exp(A_log) uniform
// in [1, 16], dt = softplus(dt_bias) log-uniform in [1e-3, 1e-1] and floored at 1e-4 (stored
// through the inverse softplus), as Mamba's dt (mamba.cpp). Not weight-decayed: A_log and dt_bias
// (the decay's own parameters, as Mamba's A_log and dt), o_norm's weight, the convolutions' biases.
#pragma once
#include <memory>

#include "framework/core/rng.hpp"
#include "models/layers.hpp"

namespace tri {

// deltanet's options (--n-heads, --conv-size, --l2-norm): the papers' defaults.
struct DeltaNetOptions : Options {
  int64_t n_heads = 4;
  int64_t conv_size = 4;  // K of the short convolutions on q, k, v; 0: none
  bool l2_norm = true;    // L2-normalise q and k per head
  std::string form = "recurrent";  // the training kernel: recurrent (fused) or chunked
  void visit(FieldVisitor& v) override;
  std::unique_ptr<Options> clone() const override { return std::make_unique<DeltaNetOptions>(*this); }
};

// gated_deltanet's: deltanet's, and its two gates (--state-gate, --output-gate).
struct GatedDeltaNetOptions : DeltaNetOptions {
  bool state_gate = true;   // alpha_t = exp(g_t) on S_{t-1}; 0: alpha = 1, DeltaNet's update
  bool output_gate = true;  // o_t * SiLU(W_g x_t) before out_proj
  void visit(FieldVisitor& v) override;
  std::unique_ptr<Options> clone() const override { return std::make_unique<GatedDeltaNetOptions>(*this); }
};

// Both families' checks across fields: d-model divisible by n-heads.
void validate_deltanet(const ModelConfig& cfg);

class DeltaNet : public Mixer {
 public:
  // cfg: checked, with DeltaNetOptions (no gates) or GatedDeltaNetOptions.
  DeltaNet(const ModelConfig& cfg, Rng& rng);
  Tensor forward(const Tensor& x, const Tensor& residual = Tensor()) override;
  std::unique_ptr<MixerState> new_state(int64_t batch) const override;
  Tensor step(const Tensor& x, MixerState& state) override;
  int64_t state_bytes(int64_t T) const override;  // S and the convolutions' windows: independent of T

  const int64_t D, H, Dh;
  const bool l2_norm, state_gate, output_gate, chunked;
  Linear q_proj, k_proj, v_proj;
  std::unique_ptr<ShortConv> q_conv, k_conv, v_conv;  // null with --conv-size 0
  Linear b_proj;
  std::unique_ptr<Linear> a_proj, g_proj;  // with the state gate, the output gate
  Tensor A_log, dt_bias;                    // with the state gate: [H] each
  Norm o_norm;
  Linear out_proj;

 private:
  struct State;
  Tensor mix(const Tensor& x, const Tensor& residual);  // the forward over x [B, T, D]
  uint64_t params_version() const;  // changes whenever a parameter is written
  void join_params(State& s) const;  // the step's side-by-side parameters, when stale
};

}  // namespace tri
