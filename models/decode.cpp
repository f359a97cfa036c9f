#include "models/decode.hpp"

#include <algorithm>
#include <string>

namespace tri {

int32_t argmax_token(const float* logits, int64_t n) { return int32_t(detail::argmax_row(logits, n)); }

namespace {

// The last position's V logits of a step's output [1, 1, V].
int32_t next_token(const Tensor& logits) {
  const int64_t V = logits.size(-1);
  return argmax_token(logits.data() + logits.numel() - V, V);
}

Tensor step_one(LanguageModel& m, DecodeState& state, int32_t token) {
  return m.step(IntTensor(Shape{1, 1}, {token}), state);
}

}  // namespace

std::vector<int32_t> greedy_decode(LanguageModel& m, const std::vector<int32_t>& prompt,
                                   int64_t max_new, int32_t stop_token) {
  if (prompt.empty()) throw Error("greedy_decode: the prompt is empty (needs at least one token)");
  if (max_new < 0) throw Error("greedy_decode: max_new " + std::to_string(max_new) + " is negative");
  DecodeState state = m.new_decode_state(1);
  Tensor logits;
  for (int32_t token : prompt) logits = step_one(m, state, token);
  std::vector<int32_t> out;
  while (int64_t(out.size()) < max_new) {
    const int32_t next = next_token(logits);
    out.push_back(next);
    if (next == stop_token || int64_t(out.size()) == max_new) break;
    logits = step_one(m, state, next);
  }
  return out;
}

Tensor RecurrentPrefixLogits::operator()(const IntTensor& prefix) {
  if (prefix.shape.nd != 2 || prefix.shape[0] != 1 || prefix.shape[1] < 1)
    throw Error("recurrent logits: prefix " + prefix.shape.str() + " must be [1, t] with t >= 1");
  const size_t n = prefix.v.size();
  const bool extends = !consumed_.empty() && consumed_.size() <= n &&
                       std::equal(consumed_.begin(), consumed_.end(), prefix.v.begin());
  if (!extends) {
    state_ = model_->new_decode_state(1);
    consumed_.clear();
    ++restarts_;
  }
  for (size_t t = consumed_.size(); t < n; ++t) {
    last_ = step_one(*model_, state_, prefix.v[t]);
    consumed_.push_back(prefix.v[t]);
    ++steps_;
  }
  return last_;
}

}  // namespace tri
