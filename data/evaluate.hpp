// Evaluation over a task's evaluation stream, at one or several sequence lengths (length
// generalisation: train at one length, evaluate at others, results per length).
#pragma once
#include <vector>

#include "data/metrics.hpp"
#include "data/tasks.hpp"

namespace tri {

// Scores of `batches` evaluation batches of `cfg` (stream_seed(seed, "eval"), batch indices
// 0..batches-1), pooled: token_acc and loss over all scored positions, seq_acc over all rows.
// `logits_of` maps inputs [B, T] to logits [B, T, V].
inline TaskScore evaluate_task(const TaskConfig& cfg, const LogitsFn& logits_of, uint64_t seed,
                               int64_t batches, int64_t batch_size) {
  if (batches < 1 || batch_size < 1)
    throw Error("evaluate: batches " + std::to_string(batches) + " and batch size " +
                std::to_string(batch_size) + " must be >= 1");
  const uint64_t stream = stream_seed(seed, "eval");
  TaskScore total;
  double correct = 0, rows_right = 0, loss = 0;
  for (int64_t i = 0; i < batches; ++i) {
    const Batch batch = make_batch(cfg, stream, uint64_t(i), batch_size);
    const TaskScore s = score_batch(logits_of(batch.inputs), batch);
    correct += s.token_acc * double(s.scored);
    loss += s.loss * double(s.scored);
    rows_right += s.seq_acc * double(s.rows);
    total.scored += s.scored;
    total.rows += s.rows;
  }
  if (total.scored) total.token_acc = correct / double(total.scored), total.loss = loss / double(total.scored);
  if (total.rows) total.seq_acc = rows_right / double(total.rows);
  return total;
}

struct LengthResult {
  int64_t seq_len;
  TaskScore score;
};

// The same evaluation at each length in `lengths` (cfg.seq_len replaced by each in turn; every
// length is validated against the task first, so an impossible one fails before any work).
inline std::vector<LengthResult> evaluate_lengths(const TaskConfig& base,
                                                  const std::vector<int64_t>& lengths,
                                                  const LogitsFn& logits_of, uint64_t seed,
                                                  int64_t batches, int64_t batch_size) {
  std::vector<TaskConfig> cfgs;
  for (int64_t T : lengths) {
    TaskConfig c = base;
    c.seq_len = T;
    c.validate();
    cfgs.push_back(c);
  }
  std::vector<LengthResult> out;
  for (const TaskConfig& c : cfgs)
    out.push_back({c.length(), evaluate_task(c, logits_of, seed, batches, batch_size)});
  return out;
}

}  // namespace tri
