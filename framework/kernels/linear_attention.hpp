// Causal linear attention (Katharopoulos et al. 2020) on feature-mapped queries and keys.
// Layout: q, k [B, T, H, Dk], v [B, T, H, Dv]; output [B, T, H, Dv].
//   S_t = sum_{s<=t} kn_s v_s^T  (Dk x Dv),   z_t = sum_{s<=t} kd_s  (Dk)
//   out_t = (qn_t^T S_t) / (qd_t^T z_t + eps)
// (qn, kn) feed the numerator and (qd, kd) the normaliser. Without RoPE both pairs are the
// feature maps phi(q), phi(k) (pass q_den/k_den undefined); with RoPE the numerator uses the
// rotated features and the normaliser the unrotated ones (RoFormer §3.4.4).
#pragma once
#include "framework/core/tensor.hpp"

namespace tri {

// Fused kernel: a running state per (batch, head), O(T Dk Dv) time, never a T x Dk x Dv tensor;
// backward rebuilds the states in a forward sweep and runs the adjoint recurrence in a reverse
// one, saving only the inputs, the output and the denominators [B, T, H].
Tensor linear_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& q_den = Tensor(), const Tensor& k_den = Tensor(),
                        float eps = 1e-6f);

// The feature map phi applied inside the kernel: the same result and gradients, bit for bit, as
// linear_attention(phi(q), phi(k), v), but phi(q) and phi(k) are recomputed in backward instead
// of being stored (two [B, T, H, Dk] tensors fewer per layer).
enum class FeatureMap { identity, elu_plus_one, relu };
Tensor linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, FeatureMap phi,
                        float eps = 1e-6f);

// Naive reference: builds the [B, H, T, T] kernel matrix from ops (differentiable).
Tensor linear_attention_naive(const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& q_den = Tensor(), const Tensor& k_den = Tensor(),
                              float eps = 1e-6f);

// One recurrent step (no grad): q, k [B, 1, H, Dk], v [B, 1, H, Dv] (q_den/k_den as above);
// updates S [B, H, Dk, Dv] and z [B, H, Dk] in place and returns out [B, 1, H, Dv].
Tensor linear_attention_step(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& S,
                             Tensor& z, const Tensor& q_den = Tensor(),
                             const Tensor& k_den = Tensor(), float eps = 1e-6f);

}  // namespace tri
