// Multi-head causal softmax attention (Vaswani et al. 2017, §3.2.2), written like the book's
// algorithm 2 (chapter 9, §9) but causal and without transposes.
// Glossary (paper -> code):
//   X                            x [B, T, D], the block's input
//   Q = X W^Q, K = X W^K, V = X W^V   q_proj, k_proj, v_proj (weights [D, D], PyTorch [out, in]),
//                                split into H heads: q, k, v [B, T, H, Dh], Dh = D / H
//   softmax(Q K^T / sqrt(Dh)) V  attention(q, k, v), fused, causal (eq. 1)
//   Concat(head_1..head_H) W^O   out_proj(merge_heads(o))
//   RoPE (Su et al. 2021, eq. 34)     q, k rotated by their positions: rope(q, t0), rope(k, t0)
//   ALiBi (Press et al. 2021, §3)     score - m_h (i - j), m_h = alibi_slopes(H)
//   sliding window W (Mistral 7B, Jiang et al. 2023, §2)   query i sees keys i - W < j <= i only
//                                (MultiHeadAttentionOptions::window; 0: every j <= i)
//   short convolution (Based, Arora et al. 2024)   q, k, v each through a depthwise causal conv
//                                of width K after its projection (HeadOptions::short_conv)
// Recurrent form: a KV cache; one step appends the new k, v row and attends with Tq = 1. With a
// window the cache is a ring buffer of W rows (the paper's rolling buffer cache): the new row
// overwrites the oldest. With short convolutions the state also keeps their last K-1 inputs.
#pragma once
#include <vector>

#include "models/layers.hpp"

namespace tri {

class LanguageModel;

// Attention's options: those of every mixer with heads, and the window.
struct MultiHeadAttentionOptions : HeadOptions {
  int64_t window = 0;  // 0: full causal attention; W: each query sees the W most recent positions
  void visit(FieldVisitor& v) override;
  std::unique_ptr<Options> clone() const override { return std::make_unique<MultiHeadAttentionOptions>(*this); }
};

class MultiHeadAttention : public HeadMixer {
 public:
  MultiHeadAttention(const ModelConfig& cfg, Rng& rng);
  Tensor forward(const Tensor& x, const Tensor& residual = Tensor()) override;
  std::unique_ptr<MixerState> new_state(int64_t batch) const override;
  Tensor step(const Tensor& x, MixerState& state) override;
  int64_t state_bytes(int64_t T) const override;  // the K and V rows of T tokens (of the last W)

  // For attention maps: when set, forward runs the naive kernel on the same (RoPE'd) q and k,
  // with the same scale, causal mask, window and ALiBi, and stores the probabilities [B, H, T, T] here.
  // Null (the fused kernel, no T x T tensor) unless set.
  Tensor* probe = nullptr;
};

// Attention probabilities of one forward pass of an attention-family model, recorded through
// every layer's probe (cleared again on return), without recording on the tape.
struct AttentionRecording {
  Tensor logits;              // [B, T, V], the forward's output
  std::vector<Tensor> probs;  // per layer: [B, H, T, T], rows sum to 1, zero above the diagonal
                              // (and, with a window W, from W below it on)
};
// An Error naming the family when the model's layers are not MultiHeadAttention.
AttentionRecording record_attention(LanguageModel& model, const IntTensor& ids);

}  // namespace tri
