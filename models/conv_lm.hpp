// ConvLM: the smallest sequence model the framework trains end to end (the demo model).
//   x = Embed(ids)                      [B, T, D]
//   x = x + CausalConv(LN(x))           mixes the last K positions, channel by channel
//   x = x + W2 gelu(W1 LN(x))           MLP, d_ff = 4D
//   logits = W_head LN(x)               [B, T, V]
#pragma once
#include "framework/module.hpp"
#include "framework/ops.hpp"
#include "framework/rng.hpp"

namespace tri {

struct ConvLMConfig {
  int vocab = 16;
  int d_model = 32;
  int d_conv = 4;
};

class ConvLM : public Module {
 public:
  ConvLM(const ConvLMConfig& cfg, uint64_t seed);
  Tensor forward(const IntTensor& ids);  // logits [B, T, V]

  ConvLMConfig cfg;
  Tensor embedding, norm1_w, norm1_b, conv_w, conv_b, norm2_w, norm2_b, fc1_w, fc1_b, fc2_w,
      fc2_b, norm_f_w, norm_f_b, head_w;
};

}  // namespace tri
