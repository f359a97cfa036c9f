// Metrics over scored positions (docs/TASKS.md): token_acc, seq_acc and loss over the scored
// positions of a Batch. The tasks' own metrics (needle per distance, copy gen_acc) are their
// TaskOptions::extra_scores.
#pragma once
#include <cmath>
#include <cstdint>

#include "data/tasks.hpp"
#include "framework/core/argmax.hpp"
#include "framework/ops/ops.hpp"

namespace tri {

// Argmax accuracy of logits [..., V] against targets [...] over the targets that are not
// kIgnoreIndex; ties go to the lowest id.
inline Accuracy token_accuracy(const Tensor& logits, const IntTensor& targets) {
  const int64_t V = logits.size(-1), rows = logits.numel() / V;
  if (targets.numel() != rows)
    throw Error("token_accuracy: logits " + logits.shape().str() + " vs targets " + targets.shape().str());
  Accuracy s;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t y = targets.data()[r];
    if (y == kIgnoreIndex) continue;
    s.correct += argmax(logits.data() + r * V, V) == y;
    ++s.total;
  }
  return s;
}

struct TaskScore {
  double token_acc = 0;  // argmax accuracy over scored positions
  double seq_acc = 0;    // share of rows (with a scored position) whose scored positions are all right
  double loss = 0;       // mean cross-entropy over scored positions (double precision)
  int64_t scored = 0, rows = 0;
};

// logits [B, T, V] (any shape with B*T rows of V) against the batch's targets.
inline TaskScore score_batch(const Tensor& logits, const Batch& batch) {
  if (logits.numel() / logits.size(-1) != batch.targets.numel())
    throw Error("score_batch: logits " + logits.shape().str() + " vs targets " + batch.targets.shape().str());
  const int64_t V = logits.size(-1), B = batch.targets.shape()[0], T = batch.targets.shape()[1];
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
      const int64_t y = batch.targets.data()[i];
      const int64_t best = argmax(z, V);
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

}  // namespace tri
