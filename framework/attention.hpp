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

// ALiBi's head slopes (Press et al. 2021): 2^(-8h/H) for h = 1..H, for H a power of two, and the
// paper's interleaving rule otherwise.
std::vector<float> alibi_slopes(int64_t heads);

// Fused kernel: tiled online softmax forward; backward recomputes the scores tile by tile from q,
// k and the saved per-row log-sum-exp, so the extra memory is O(T) per head, never T x T.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt);

// Naive reference: materialises the [B, H, Tq, Tk] probabilities (returned through `probs`
// when given, for visualisation). Differentiable; used to test the fused kernel.
Tensor attention_naive(const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionOptions& opt, Tensor* probs = nullptr);

// Rotary position embedding on x [B, T, H, Dh] (Dh even), "rotate half" form as in GPT-NeoX /
// LLaMA: pairs (x[j], x[j + Dh/2]) rotate by angle pos * base^(-2j/Dh), pos = offset + t.
// Differentiable (backward rotates by the negative angle).
Tensor rope(const Tensor& x, int64_t offset, float base = 10000.f);

// The book's sinusoidal table (§8): PE[pos, 2i] = sin(pos / 10000^(2i/D)),
// PE[pos, 2i+1] = cos(pos / 10000^(2i/D)); shape [T, D], rows offset .. offset+T-1. No grad.
Tensor sinusoidal_positions(int64_t T, int64_t D, int64_t offset = 0);

}  // namespace tri
