#include "data/evaluate.hpp"

#include <string>

namespace tri {

EvalResult evaluate_task(const TaskConfig& cfg, const BatchLogits& logits_of, const EvalSettings& s,
                         const GreedyDecoder* decode) {
  if (s.batches < 1 || s.batch_size < 1)
    throw Error("evaluate: batches " + std::to_string(s.batches) + " and batch size " +
                std::to_string(s.batch_size) + " must be >= 1");
  const uint64_t stream = stream_seed(s.seed, s.split);
  EvalResult r;
  r.seq_len = cfg.length();
  TaskScore& total = r.score;
  double correct = 0, rows_right = 0, loss = 0;
  for (int64_t i = 0; i < s.batches; ++i) {
    const Batch batch = make_batch(cfg, stream, uint64_t(i), s.batch_size);
    const Tensor logits = logits_of(batch);
    const TaskScore b = score_batch(logits, batch);
    correct += b.token_acc * double(b.scored);
    loss += b.loss * double(b.scored);
    rows_right += b.seq_acc * double(b.rows);
    total.scored += b.scored;
    total.rows += b.rows;
    cfg.behaviour().extra_scores(cfg, batch, logits, decode, r.extra);
  }
  if (total.scored) total.token_acc = correct / double(total.scored), total.loss = loss / double(total.scored);
  if (total.rows) total.seq_acc = rows_right / double(total.rows);
  return r;
}

std::vector<EvalResult> evaluate_lengths(const TaskConfig& cfg, const std::vector<int64_t>& lengths,
                                         const BatchLogits& logits_of, const EvalSettings& s,
                                         const GreedyDecoder* decode) {
  std::vector<TaskConfig> at;
  for (int64_t T : lengths) {
    TaskConfig c = cfg;
    c.behaviour().set_length(c, T);
    c.validate();
    at.push_back(c);
  }
  std::vector<EvalResult> out;
  for (const TaskConfig& c : at) out.push_back(evaluate_task(c, logits_of, s, decode));
  return out;
}

}  // namespace tri
