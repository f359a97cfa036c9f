// Softmax attention kernels. Layout: q [B, Tq, H, Dh], k and v [B, Tk, H, Dh] — the layout a
// linear projection [B, T, D] reshapes to, so no transposes are needed. Output [B, Tq, H, Dh].
// Causal masking aligns the queries to the end of the keys (query i sits at absolute position
// Tk - Tq + i), so Tq = 1 against a KV cache of Tk entries is one decoding step.
//   score(i, j) = scale * q_i . k_j - slope_h * (pos_i - pos_j)   (ALiBi when slopes are given)
//   out_i = sum_j softmax_j(score(i, .)) v_j,  j <= pos_i when causal
#pragma once
#include <vector>

#include "tensor.hpp"

namespace tri {

struct AttentionOptions {
  bool causal = true;
  float scale = 0.f;                // 0 means 1/sqrt(Dh)
  std::vector<float> alibi_slopes;  // empty, or one slope per head
};

// Fused kernel: tiled online softmax forward; backward recomputes the scores tile by tile from q,
// k and the saved per-row log-sum-exp, so the extra memory is O(T) per head, never T x T.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt);

// Decoding (attention_decode.cpp): a few queries against a long KV cache without a gradient,
// reading the cache in place (no packed copies); the fused kernel's results to float rounding.
// With a gradient it is attention() itself.
Tensor attention_decode(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt);

// Naive reference: materialises the [B, H, Tq, Tk] probabilities (returned through `probs`
// when given, for visualisation). Differentiable; used to test the fused kernel.
Tensor attention_naive(const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionOptions& opt, Tensor* probs = nullptr);

}  // namespace tri
