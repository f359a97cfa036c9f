// Evaluation of a trained model for `trilemma eval` and `trilemma generate`: the pooled task
// metrics of data/evaluate.hpp at one sequence length, plus what a single score hides (needle
// accuracy per distance, copy exact-match by greedy decoding through the recurrent state), and
// the small parsers both commands share.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "data/metrics.hpp"
#include "models/lm.hpp"
#include "train/run_config.hpp"

namespace tri::cli {

struct EvalSettings {
  int64_t batches = 1, batch_size = 1;  // evaluation batches and rows per batch
  uint64_t seed = 0;                    // base seed; the evaluation stream is stream_seed(seed, "eval")
  bool gen_acc = false;                 // copy: greedy-decoding exact match per row
};

struct LengthReport {
  int64_t seq_len = 0;
  TaskScore score;                           // token_acc, seq_acc, loss, scored, rows
  bool has_gen_acc = false;
  int64_t gen_exact = 0, gen_rows = 0;       // copy rows decoded exactly / decoded
  std::map<int64_t, TokenScore> by_distance; // needle only
  double gen_acc() const { return gen_rows ? double(gen_exact) / double(gen_rows) : 0.0; }
};

// Receives the first evaluated batch and its logits [B, T, V] (for --dump).
using FirstBatchFn = std::function<void(const Batch& batch, const Tensor& logits)>;

// Evaluates `m` on `cfg` (its seq_len is the length) over batches 0..batches-1 of the
// evaluation stream. The scores are data/evaluate.hpp's evaluate_task; gen_acc decodes with
// RecurrentPrefixLogits (models/decode.hpp), one step per token.
LengthReport evaluate_length(LanguageModel& m, const TaskConfig& cfg, const EvalSettings& s,
                             const FirstBatchFn& first_batch = nullptr);

// --seed's notifier: any non-negative integer.
void check_seed(long seed);

// An integer setting of the run saved in a checkpoint's config (e.g. "seed", "eval-batches");
// missing or malformed is an Error naming the checkpoint and the key.
int64_t saved_setting(const ConfigMap& config, const std::string& key, const std::string& checkpoint);

}  // namespace tri::cli
