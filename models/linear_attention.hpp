// Causal linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"), multi-head, with
// Based's Taylor feature map and short convolutions (Arora et al. 2024) as options.
// Glossary (paper -> code):
//   x_i                     x [B, T, D]
//   Q, K, V = x W_Q, x W_K, x W_V    q_proj, k_proj, v_proj, split into H heads: q, k [B, T, H, F],
//                           v [B, T, H, Dh]; F = LinearAttentionOptions::feature_dim (0: Dh)
//   short convolution (Based §4)     q, k, v each through a depthwise causal conv of width K
//                           after its projection (HeadOptions::short_conv)
//   phi(x) = elu(x) + 1     feature map (eq. 7); LinearAttentionOptions::feature_map: elu | relu |
//                           identity | taylor
//   phi(x) = (1, x / F^(1/4), vec(x x^T) / (sqrt(2) sqrt(F)))   Based's second-order Taylor map
//                           (§4, taylor_features): phi(q) . phi(k) = 1 + s + s^2 / 2, s = q . k /
//                           sqrt(F), an approximation of exp(s), always > 0; width 1 + F + F^2
//   V'_i = phi(Q_i)^T S_i / phi(Q_i)^T Z_i,  S_i = sum_{j<=i} phi(K_j) V_j^T,
//          Z_i = sum_{j<=i} phi(K_j)         (eqs. 10-12: causal masking as a running sum)
//                           linear_attention(phi(q), phi(k), v); elu, relu and identity inside the kernel
//   RoPE (RoFormer §3.4.4)  numerator on rope(phi(q)), rope(phi(k)); normaliser on phi(q), phi(k)
//                           (not with taylor: its features are not pairs to rotate)
//   output                  out_proj(merge_heads(V'))
// Recurrent form (eqs. 18-20): the state (S [B, H, Dk, Dh], Z [B, H, Dk]), constant in T, with
// Dk = F, or 1 + F + F^2 for taylor: H ((1 + F + F^2) Dh + 1 + F + F^2) floats per layer, which
// grows as F^2 (d 64, 1 head, F 16: 273 x 65 floats = 71 kB per layer; F 64 would take 1.1 MB).
// With short convolutions the state also keeps their last K-1 inputs.
#pragma once
#include "framework/kernels/linear_attention.hpp"
#include "models/layers.hpp"

namespace tri {

struct LinearAttentionOptions : HeadOptions {
  std::string feature_map = "elu";  // elu (elu+1) | relu | identity | taylor
  int64_t feature_dim = 0;          // F, the per-head width of q and k; 0: Dh
  void visit(FieldVisitor& v) override;
  std::unique_ptr<Options> clone() const override { return std::make_unique<LinearAttentionOptions>(*this); }
};

class LinearAttention : public HeadMixer {
 public:
  LinearAttention(const ModelConfig& cfg, Rng& rng);
  Tensor forward(const Tensor& x, const Tensor& residual = Tensor()) override;
  std::unique_ptr<MixerState> new_state(int64_t batch) const override;
  Tensor step(const Tensor& x, MixerState& state) override;
  int64_t state_bytes(int64_t T) const override;  // S, Z and the convolutions' windows: independent of T

 private:
  bool taylor_;              // Based's Taylor map (taylor_features), outside the kernel
  FeatureMap feature_map_;   // otherwise the map the kernel applies
  int64_t feature_width_;    // Dk: the width of phi(q), phi(k) per head
  Tensor phi(const Tensor& x) const;
};

}  // namespace tri
