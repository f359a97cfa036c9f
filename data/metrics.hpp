// Metrics over scored positions (targets != kIgnoreIndex).
#pragma once
#include <cstdint>

#include "framework/ops.hpp"

namespace tri {

struct TokenScore {
  int64_t correct = 0;
  int64_t scored = 0;
  double accuracy() const { return scored ? double(correct) / double(scored) : 0.0; }
};

// Argmax accuracy of logits [..., V] against targets [...]; ties go to the lowest id.
inline TokenScore token_accuracy(const Tensor& logits, const IntTensor& targets) {
  const int64_t V = logits.size(-1), rows = logits.numel() / V;
  if (targets.numel() != rows)
    throw Error("token_accuracy: logits " + logits.shape().str() + " vs targets " + targets.shape.str());
  TokenScore s;
  const float* p = logits.data();
  for (int64_t r = 0; r < rows; ++r) {
    if (targets.v[size_t(r)] == kIgnoreIndex) continue;
    int64_t best = 0;
    for (int64_t j = 1; j < V; ++j)
      if (p[r * V + j] > p[r * V + best]) best = j;
    s.correct += best == targets.v[size_t(r)];
    ++s.scored;
  }
  return s;
}

}  // namespace tri
