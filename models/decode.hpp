// Greedy decoding through the recurrent interface (LanguageModel::new_decode_state / step):
// one token per step, O(1) work per token for the recurrent mixers and O(t) for attention's KV
// cache, instead of a full forward pass over the growing prefix.
#pragma once
#include <cstdint>
#include <vector>

#include "models/lm.hpp"

namespace tri {

// Feeds `prompt` (non-empty) token by token with batch 1, then appends the argmax token until
// `max_new` tokens are generated or `stop_token` (>= 0) is generated; the stop token is part of
// the result. Returns the generated tokens only (not the prompt). The last generated token is
// never fed back, so prompt.size() + max_new - 1 positions are consumed.
std::vector<int32_t> greedy_decode(LanguageModel& m, const std::vector<int32_t>& prompt,
                                   int64_t max_new, int32_t stop_token = -1);

}  // namespace tri
