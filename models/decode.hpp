// Greedy decoding through the recurrent interface (LanguageModel::new_decode_state / step):
// one token per step, O(1) work per token for the recurrent mixers and O(t) for attention's KV
// cache, instead of a full forward pass over the growing prefix.
#pragma once
#include <cstdint>
#include <vector>

#include "data/metrics.hpp"
#include "models/lm.hpp"

namespace tri {

// Index of the largest of `n` values; ties go to the lowest index (as token_accuracy).
int32_t argmax_token(const float* logits, int64_t n);

// Feeds `prompt` (non-empty) token by token with batch 1, then appends the argmax token until
// `max_new` tokens are generated or `stop_token` (>= 0) is generated; the stop token is part of
// the result. Returns the generated tokens only (not the prompt). The last generated token is
// never fed back, so prompt.size() + max_new - 1 positions are consumed.
std::vector<int32_t> greedy_decode(LanguageModel& m, const std::vector<int32_t>& prompt,
                                   int64_t max_new, int32_t stop_token = -1);

// A LogitsFn (data/metrics.hpp) over one decoding state: called with a prefix [1, t], it
// returns the logits [1, 1, V] of the next token. When the prefix extends the one consumed so
// far, only the new tokens are stepped, so growing a prefix to length T costs T steps rather
// than T^2/2 positions; any other prefix restarts from a fresh state. Pass it as
// std::ref(adapter) where a LogitsFn is expected.
class RecurrentPrefixLogits {
 public:
  explicit RecurrentPrefixLogits(LanguageModel& m) : model_(&m) {}
  Tensor operator()(const IntTensor& prefix);
  int64_t steps() const { return steps_; }        // tokens stepped since construction
  int64_t restarts() const { return restarts_; }  // fresh states taken

 private:
  LanguageModel* model_;
  DecodeState state_;
  std::vector<int32_t> consumed_;
  Tensor last_;  // logits after the last consumed token
  int64_t steps_ = 0, restarts_ = 0;
};

}  // namespace tri
