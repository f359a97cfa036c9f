// Causal linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"), multi-head.
// Glossary (paper -> code):
//   x_i                     x [B, T, D]
//   Q, K, V = x W_Q, x W_K, x W_V    q_proj, k_proj, v_proj, split into H heads [B, T, H, Dh]
//   phi(x) = elu(x) + 1     feature map (eq. 7); LinearAttentionOptions::feature_map: elu | relu | identity
//   V'_i = phi(Q_i)^T S_i / phi(Q_i)^T Z_i,  S_i = sum_{j<=i} phi(K_j) V_j^T,
//          Z_i = sum_{j<=i} phi(K_j)         (eqs. 10-12: causal masking as a running sum)
//                           linear_attention(phi(q), phi(k), v), phi applied inside the kernel
//   RoPE (RoFormer §3.4.4)  numerator on rope(phi(q)), rope(phi(k)); normaliser on phi(q), phi(k)
//   output                  out_proj(merge_heads(V'))
// Recurrent form (eqs. 18-20): the state (S [B, H, Dh, Dh], Z [B, H, Dh]), constant in T.
#pragma once
#include "framework/kernels/linear_attention.hpp"
#include "models/layers.hpp"

namespace tri {

struct LinearAttentionOptions : HeadOptions {
  std::string feature_map = "elu";  // elu (elu+1) | relu | identity
  void visit(FieldVisitor& v) override;
  std::unique_ptr<Options> clone() const override { return std::make_unique<LinearAttentionOptions>(*this); }
};

class LinearAttention : public HeadMixer {
 public:
  LinearAttention(const ModelConfig& cfg, Rng& rng);
  Tensor forward(const Tensor& x, const Tensor& residual = Tensor()) override;
  std::unique_ptr<MixerState> new_state(int64_t batch) const override;
  Tensor step(const Tensor& x, MixerState& state) override;
  int64_t state_bytes(int64_t T) const override;  // S and Z: independent of T

 private:
  FeatureMap feature_map_;
  Tensor phi(const Tensor& x) const;
};

}  // namespace tri
