#include "models/decode.hpp"

#include <string>

#include "framework/core/argmax.hpp"

namespace tri {

std::vector<int32_t> greedy_decode(LanguageModel& m, const std::vector<int32_t>& prompt,
                                   int64_t max_new, int32_t stop_token) {
  if (prompt.empty()) throw Error("greedy_decode: the prompt is empty (needs at least one token)");
  if (max_new < 0) throw Error("greedy_decode: max_new " + std::to_string(max_new) + " is negative");
  DecodeState state = m.new_decode_state(1);
  auto step = [&](int32_t token) { return m.step(IntTensor(Shape{1, 1}, {token}), state); };
  Tensor logits;  // [1, 1, V] after the last token fed
  for (int32_t token : prompt) logits = step(token);
  std::vector<int32_t> out;
  while (int64_t(out.size()) < max_new) {
    const int32_t next = int32_t(argmax(logits.data(), logits.size(-1)));
    out.push_back(next);
    if (next == stop_token || int64_t(out.size()) == max_new) break;
    logits = step(next);
  }
  return out;
}

}  // namespace tri
