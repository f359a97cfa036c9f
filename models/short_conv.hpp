// The short convolution of Based (Arora et al. 2024, §4): a depthwise causal convolution of
// width K over time, applied to q, k and v after their projections, so that each position mixes
// in its K-1 predecessors before attention compares it with the others (local token shifts that
// a feature map alone handles poorly).
// As PyTorch's nn.Conv1d(C, C, K, groups=C, padding=K-1) keeping the first T outputs: weight
// [C, 1, K] and bias [C], both initialised U(-1/sqrt(K), 1/sqrt(K)) (fan_in = K).
#pragma once
#include <cstdint>

#include "framework/core/module.hpp"
#include "framework/core/rng.hpp"
#include "framework/core/tensor.hpp"

namespace tri {

class ShortConv : public Module {
 public:
  ShortConv(int64_t channels, int64_t width, Rng& rng);
  // x [B, T, C] -> [B, T, C], causal (framework op causal_conv1d).
  Tensor operator()(const Tensor& x) const;
  // Decoding: the last K-1 inputs, oldest first, zeros before the first token: [batch, K-1, C].
  Tensor new_window(int64_t batch) const;
  // One token x [B, 1, C] -> [B, 1, C], with the forward's order of additions (the same bits);
  // slides x into the window.
  Tensor step(const Tensor& x, Tensor& window) const;

  int64_t channels, width;
  Tensor weight, bias;
};

}  // namespace tri
