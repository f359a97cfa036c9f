// Evaluation over a task's evaluation stream, at one or several sequence lengths (length
// generalisation: train at one length, evaluate at others, results per length). One pass over
// the batches gives the pooled scores and the task's extra metrics.
#pragma once
#include <functional>
#include <vector>

#include "data/metrics.hpp"
#include "data/tasks.hpp"

namespace tri {

struct EvalSettings {
  int64_t batches = 4;      // batch indices 0..batches-1 of the evaluation stream
  int64_t batch_size = 32;  // rows per batch
  uint64_t seed = 0;        // base seed; the stream is stream_seed(seed, split)
  std::string split = "eval";  // "eval" (held-out test) or "valid" (validation)
};

struct EvalResult {
  int64_t seq_len = 0;
  TaskScore score;    // token_acc and loss over all scored positions, seq_acc over all rows
  ExtraScores extra;  // the task's own metrics, pooled
};

// The model under evaluation: a whole batch in, logits [B, T, V] out.
using BatchLogits = std::function<Tensor(const Batch&)>;

// Scores of s.batches evaluation batches of `cfg`. `decode` (may be null) lets tasks with a
// generated answer score it by greedy decoding.
EvalResult evaluate_task(const TaskConfig& cfg, const BatchLogits& logits_of, const EvalSettings& s,
                         const GreedyDecoder* decode = nullptr);

// The same evaluation at each length in `lengths` (cfg.seq_len replaced by each in turn; every
// length is validated first, so an impossible one fails before any work).
std::vector<EvalResult> evaluate_lengths(const TaskConfig& cfg, const std::vector<int64_t>& lengths,
                                         const BatchLogits& logits_of, const EvalSettings& s,
                                         const GreedyDecoder* decode = nullptr);

}  // namespace tri
