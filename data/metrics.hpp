// Metrics over scored positions (targets != kIgnoreIndex). gen_acc for copy is computed here by
// greedy decoding through a logits callback (copy_gen_acc), so any model can be plugged in.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>

#include "data/tasks.hpp"
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

// ---- Task metrics (specs/TASKS.md): token_acc, seq_acc and loss over the scored positions of
// a Batch, accuracy per distance for needle, and gen_acc for copy by greedy decoding.
namespace tri {

struct TaskScore {
  double token_acc = 0;  // argmax accuracy over scored positions
  double seq_acc = 0;    // share of rows (with a scored position) whose scored positions are all right
  double loss = 0;       // mean cross-entropy over scored positions (double precision)
  int64_t scored = 0, rows = 0;
};

namespace detail {
inline int64_t argmax_row(const float* p, int64_t V) {
  int64_t best = 0;
  for (int64_t j = 1; j < V; ++j)
    if (p[j] > p[best]) best = j;
  return best;
}
inline void check_logits(const Tensor& logits, const Batch& batch, const char* who) {
  if (logits.numel() / logits.size(-1) != batch.targets.numel())
    throw Error(std::string(who) + ": logits " + logits.shape().str() + " vs targets " +
                batch.targets.shape.str());
}
}  // namespace detail

// logits [B, T, V] (any shape with B*T rows of V) against the batch's targets.
inline TaskScore score_batch(const Tensor& logits, const Batch& batch) {
  detail::check_logits(logits, batch, "score_batch");
  const int64_t V = logits.size(-1), B = batch.targets.shape[0], T = batch.targets.shape[1];
  const float* p = logits.data();
  TaskScore s;
  int64_t correct = 0, rows_right = 0;
  double loss = 0;
  for (int64_t b = 0; b < B; ++b) {
    bool row_right = true, row_scored = false;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t i = b * T + t;
      if (!batch.mask[size_t(i)]) continue;
      const float* z = p + i * V;
      const int64_t y = batch.targets.v[size_t(i)];
      const int64_t best = detail::argmax_row(z, V);
      double mx = z[best], sum = 0;
      for (int64_t j = 0; j < V; ++j) sum += std::exp(double(z[j]) - mx);
      loss += mx + std::log(sum) - double(z[y]);
      correct += best == y;
      row_right &= best == y;
      row_scored = true;
      ++s.scored;
    }
    if (row_scored) {
      ++s.rows;
      rows_right += row_right;
    }
  }
  if (s.scored) s.token_acc = double(correct) / double(s.scored), s.loss = loss / double(s.scored);
  if (s.rows) s.seq_acc = double(rows_right) / double(s.rows);
  return s;
}

// Needle: argmax accuracy of the scored positions per key-query distance.
inline std::map<int64_t, TokenScore> accuracy_by_distance(const Tensor& logits, const Batch& batch) {
  detail::check_logits(logits, batch, "accuracy_by_distance");
  const int64_t V = logits.size(-1), B = batch.targets.shape[0], T = batch.targets.shape[1];
  if (int64_t(batch.distance.size()) != B)
    throw Error("accuracy_by_distance: the batch has no per-row distance (needle only)");
  std::map<int64_t, TokenScore> by;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t i = b * T + t;
      if (!batch.mask[size_t(i)]) continue;
      TokenScore& s = by[batch.distance[size_t(b)]];
      s.correct += detail::argmax_row(logits.data() + i * V, V) == batch.targets.v[size_t(i)];
      ++s.scored;
    }
  return by;
}

// Copy gen_acc: is row b's answer (the string and EOS) produced by greedy decoding? `logits_of`
// maps a prefix [1, t] to logits whose last V values score the next token (e.g. [1, t, V]).
// Decoding stops at the first wrong token: exact match needs every one right.
using LogitsFn = std::function<Tensor(const IntTensor& prefix)>;
inline bool copy_generated_right(const Batch& batch, int64_t row, const LogitsFn& logits_of) {
  const AnswerSpan span = copy_answer_span(batch, row);
  const int64_t T = batch.inputs.shape[1];
  const int32_t* x = batch.inputs.v.data() + row * T;
  std::vector<int32_t> prefix(x, x + span.start);
  for (int64_t k = 0; k < span.length; ++k) {
    const int64_t t = int64_t(prefix.size());
    const Tensor z = logits_of(IntTensor(Shape{1, t}, prefix));
    const int64_t V = z.size(-1);
    const int64_t next = detail::argmax_row(z.data() + z.numel() - V, V);
    if (next != x[span.start + k]) return false;
    prefix.push_back(int32_t(next));
  }
  return true;
}

// Share of the batch's rows that greedy decoding copies exactly.
inline double copy_gen_acc(const Batch& batch, const LogitsFn& logits_of) {
  const int64_t B = batch.inputs.shape[0];
  int64_t right = 0;
  for (int64_t b = 0; b < B; ++b) right += copy_generated_right(batch, b, logits_of);
  return B ? double(right) / double(B) : 0.0;
}

}  // namespace tri
