// The Mamba 2 mixer (Dao & Gu 2024, "Transformers are SSMs: Generalized Models and Efficient
// Algorithms Through Structured State Space Duality"), family `mamba2`: Mamba's selective SSM
// with a scalar decay per head (the SSD layer) and all of its inputs projected in parallel from
// the block's input.
// Glossary (paper -> code; names and shapes as mamba_ssm's Mamba2, the block prefixes "mixer."):
//   u [B, T, D]                      the block's input
//   E = expand * D                   d_inner (--expand): the SSM's channels
//   P = head_dim, H = E / P          --head-dim; the channels split into H heads of P
//   N = d_state                      --state-size: each head's state is P x N
//   G = n_groups                     --n-groups: B and C shared by H / G heads each (as
//                                    multi-value attention shares its keys)
//   z, xBC, dt = in_proj(u)          in_proj [2E + 2GN + H, D], no bias
//   xBC = SiLU(conv1d(xBC))          conv1d: depthwise causal, width K (--d-conv), over x, B and C
//                                    together (models/short_conv.hpp)
//   x, B, C = split(xBC)             x [B, T, H, P], B, C [B, T, G, N]
//   Delta = softplus(dt + dt_bias)   dt_bias [H]
//   A = -exp(A_log)                  A_log [H]: one negative scalar per head
//   H_t = exp(Delta_t A) H_{t-1} + Delta_t x_t B_t^T,   y_t = H_t C_t + D x_t
//                                    ssd_scan (framework/kernels/ssd_scan.hpp); D [H]
//   y = RMSNorm(y * SiLU(z))         norm.weight [E]: the gate first, then the norm
//                                    (mamba_ssm's norm_before_gate=False), over each group's
//                                    E / G channels (its group_size), eps 1e-5
//   out = out_proj(y)                out_proj [D, E], no bias
// Recurrent state: H per head, H P N = E N floats per layer, and the convolution's last K-1
// inputs, (K-1)(E + 2GN) floats: constant in T.
// Initialisation (mamba_ssm's Mamba2.__init__): PyTorch's defaults for the linears and the
// convolution; A = exp(A_log) uniform in [1, 16]; Delta = softplus(dt_bias) log-uniform in
// [1e-3, 1e-1], floored at 1e-4 (stored through the inverse softplus); D = 1; norm.weight = 1.
// Not weight-decayed: A_log, dt_bias, D (the SSM's own parameters, as mamba_ssm excludes them),
// norm.weight and conv1d.bias.
#pragma once
#include <memory>

#include "framework/core/rng.hpp"
#include "models/config.hpp"
#include "models/mixer.hpp"
#include "models/short_conv.hpp"

namespace tri {

// The family's options: the paper's defaults. --state-size, not Mamba's --d-state: a key two
// families share has one default, and Mamba's N is 16.
struct Mamba2Options : Options {
  int64_t state_size = 64;  // N
  int64_t head_dim = 64;    // P
  int64_t n_groups = 1;     // G
  int64_t d_conv = 4;       // K (a key shared with Mamba, the same default)
  int64_t expand = 2;       // E = expand * d_model (shared with Mamba)
  void visit(FieldVisitor& v) override;
  std::unique_ptr<Options> clone() const override { return std::make_unique<Mamba2Options>(*this); }
};

// Checks across fields: head-dim divides E, n-groups divides H.
void validate_mamba2(const ModelConfig& cfg);

class Mamba2Mixer : public Mixer {
 public:
  // cfg: checked (a one-line Error otherwise).
  Mamba2Mixer(const ModelConfig& cfg, Rng& rng);
  Tensor forward(const Tensor& x, const Tensor& residual = Tensor()) override;
  std::unique_ptr<MixerState> new_state(int64_t batch) const override;
  Tensor step(const Tensor& x, MixerState& state) override;
  int64_t state_bytes(int64_t T) const override;  // H and the conv window: independent of T

  const int64_t D, E, P, H, N, G, K;
  Tensor in_proj_w;
  ShortConv conv1d;
  Tensor dt_bias, A_log, D_skip, norm_w, out_proj_w;

 private:
  struct State;
  Tensor mix(const Tensor& u, const Tensor& residual);  // the forward over u [B, T, D]
};

}  // namespace tri
