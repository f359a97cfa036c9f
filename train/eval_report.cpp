#include "train/eval_report.hpp"

#include <cstdint>

#include "data/evaluate.hpp"
#include "framework/autograd.hpp"
#include "models/decode.hpp"

namespace tri::cli {

LengthReport evaluate_length(LanguageModel& m, const TaskConfig& cfg, const EvalSettings& s,
                             const FirstBatchFn& first_batch) {
  LengthReport r;
  r.seq_len = cfg.length();
  r.has_gen_acc = s.gen_acc;
  const uint64_t stream = stream_seed(s.seed, "eval");
  RecurrentPrefixLogits recurrent(m);
  int64_t index = 0;
  // evaluate_task draws batch `index` and asks for its logits; the same batch is drawn again
  // here (a pure function of seed and index, far cheaper than the forward pass) so that the
  // per-row metrics see its targets, mask and distances.
  const LogitsFn logits_of = [&](const IntTensor& inputs) {
    Tensor logits;
    {
      NoGradGuard no_grad;
      logits = m.forward(inputs);
    }
    const Batch batch = make_batch(cfg, stream, uint64_t(index), s.batch_size);
    if (batch.inputs.v != inputs.v)
      throw Error("evaluate: batch " + std::to_string(index) + " is not the evaluation stream's");
    if (index == 0 && first_batch) first_batch(batch, logits);
    if (cfg.task == "needle")
      for (const auto& [d, t] : accuracy_by_distance(logits, batch)) {
        r.by_distance[d].correct += t.correct;
        r.by_distance[d].scored += t.scored;
      }
    if (s.gen_acc)
      for (int64_t b = 0; b < batch.inputs.shape[0]; ++b) {
        r.gen_exact += copy_generated_right(batch, b, std::ref(recurrent));
        ++r.gen_rows;
      }
    ++index;
    return logits;
  };
  r.score = evaluate_task(cfg, logits_of, s.seed, s.batches, s.batch_size);
  return r;
}

void check_seed(long seed) {
  if (seed < 0) throw UsageError("--seed " + std::to_string(seed) + " is negative (allowed: >= 0)");
}

int64_t saved_setting(const ConfigMap& config, const std::string& key, const std::string& checkpoint) {
  try {
    return config_int(config, key, 0, INT64_MAX);
  } catch (const UsageError& e) {
    throw Error("checkpoint " + checkpoint + ": config: " + e.what());
  }
}

}  // namespace tri::cli
