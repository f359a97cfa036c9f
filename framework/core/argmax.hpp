// The index of the largest of n values; ties go to the lowest index. The one argmax that
// accuracies and greedy decoding share, so both read logits the same way.
#pragma once
#include <cstdint>

namespace tri {

inline int64_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t j = 1; j < n; ++j)
    if (x[j] > x[best]) best = j;
  return best;
}

}  // namespace tri
