// The lag task: a warm-up task for the training demo. Tokens are i.i.d. uniform over V; the
// target at t is the token seen `lag` steps earlier, scored from t = lag on. A model must move
// information along time, which a causal convolution of width > lag can do.
// Rows are a pure function of (seed, batch index): any batch can be regenerated.
#pragma once
#include <cstdint>
#include <vector>

#include "framework/ops.hpp"
#include "framework/rng.hpp"

namespace tri {

struct LagBatch {
  IntTensor inputs;   // [B, T]
  IntTensor targets;  // [B, T], kIgnoreIndex where unscored
};

inline LagBatch lag_batch(uint64_t seed, uint64_t index, int64_t B, int64_t T, int V, int lag) {
  if (lag < 1 || lag >= T)
    throw Error("lag task: lag " + std::to_string(lag) + " out of range [1, " + std::to_string(T) + ")");
  Rng rng(seed_mix(seed, index));
  std::vector<int32_t> x(size_t(B * T)), y(size_t(B * T));
  for (auto& v : x) v = int32_t(rng.below(uint64_t(V)));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      y[size_t(b * T + t)] = t >= lag ? x[size_t(b * T + t - lag)] : kIgnoreIndex;
  return {IntTensor(Shape{B, T}, std::move(x)), IntTensor(Shape{B, T}, std::move(y))};
}

}  // namespace tri
