// Softmax attention kernels. Layout: q [B, Tq, H, Dh], k and v [B, Tk, H, Dh] — the layout a
// linear projection [B, T, D] reshapes to, so no transposes are needed. Output [B, Tq, H, Dh].
// Causal masking aligns the queries to the end of the keys (query i sits at absolute position
// Tk - Tq + i), so Tq = 1 against a KV cache of Tk entries is one decoding step.
//   score(i, j) = scale * q_i . k_j - slope_h * (pos_i - pos_j)   (ALiBi when slopes are given)
//   out_i = sum_j softmax_j(score(i, .)) v_j,  j <= pos_i when causal,
//           and pos_i - window < j with a window (the `window` most recent keys, pos_i included)
#pragma once
#include <vector>

#include "framework/core/tensor.hpp"

namespace tri {

struct AttentionOptions {
  bool causal = true;
  float scale = 0.f;                // 0 means 1/sqrt(Dh)
  std::vector<float> alibi_slopes;  // empty, or one slope per head
  int64_t window = 0;               // 0: every key up to the query; W >= 1: the W most recent (causal only)
};

// Fused kernel: tiled online softmax forward; backward recomputes the scores tile by tile from q,
// k and the saved per-row log-sum-exp, so the extra memory is O(T) per head, never T x T. Both
// skip the tiles outside the causal band: with a window W, O(T W) time per head.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt);

// Decoding (attention_decode.cpp): a few queries against a long KV cache without a gradient,
// reading the cache in place (no packed copies); the fused kernel's results to float rounding.
// The cache may be a ring buffer: key position j (0 = the oldest cached) is row
// (first_row + j) % Tk of k and v. With a gradient it is attention() itself (rows in order only).
Tensor attention_decode(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt,
                        int64_t first_row = 0);
// The same with plain loops only: the reference that attention_decode's vector passes (AVX-512,
// Dh a multiple of 16) reproduce bit for bit.
Tensor attention_decode_plain(const Tensor& q, const Tensor& k, const Tensor& v,
                              const AttentionOptions& opt, int64_t first_row = 0);

// Naive reference: materialises the [B, H, Tq, Tk] probabilities (returned through `probs`
// when given, for visualisation). Differentiable; used to test the fused kernel.
Tensor attention_naive(const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionOptions& opt, Tensor* probs = nullptr);

}  // namespace tri
