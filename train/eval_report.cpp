#include "train/eval_report.hpp"

#include <cerrno>
#include <cstdlib>

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

namespace {

// Every piece of `text` between separators, empty ones included.
std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> pieces;
  size_t pos = 0;
  for (size_t end; (end = text.find(separator, pos)) != std::string::npos; pos = end + 1)
    pieces.push_back(text.substr(pos, end - pos));
  pieces.push_back(text.substr(pos));
  return pieces;
}

}  // namespace

std::vector<int64_t> parse_int_list(const std::string& option, const std::string& text, int64_t lo,
                                    int64_t hi, bool spaces_too) {
  const std::string allowed = "(allowed: integers " + std::to_string(lo) + ".." + std::to_string(hi) +
                              (spaces_too ? " separated by spaces or commas)" : ", comma-separated)");
  auto bad = [&](const std::string& item) {
    return UsageError("--" + option + ": '" + item + "' in '" + text + "' is not allowed " + allowed);
  };
  const std::vector<std::string> fields = split(text, ',');
  std::vector<int64_t> out;
  for (const std::string& field : fields) {
    std::vector<std::string> items;  // runs of spaces are one separator
    for (const std::string& w : spaces_too ? split(field, ' ') : std::vector<std::string>{field})
      if (!w.empty()) items.push_back(w);
    if (items.empty() && fields.size() > 1) throw bad(field);  // "64,,128"
    for (const std::string& item : items) {
      char* rest = nullptr;
      errno = 0;
      const long long v = std::strtoll(item.c_str(), &rest, 10);
      if (*rest != '\0' || errno == ERANGE || v < lo || v > hi) throw bad(item);
      out.push_back(v);
    }
  }
  if (out.empty()) throw UsageError("--" + option + " '" + text + "' holds no value " + allowed);
  return out;
}

int64_t saved_setting(const ConfigMap& config, const std::string& key, const std::string& checkpoint) {
  auto it = config.find(key);
  if (it == config.end()) throw Error("checkpoint " + checkpoint + ": config has no " + key);
  char* rest = nullptr;
  errno = 0;
  const long long v = std::strtoll(it->second.c_str(), &rest, 10);
  if (it->second.empty() || *rest != '\0' || errno == ERANGE || v < 0)
    throw Error("checkpoint " + checkpoint + ": config " + key + " '" + it->second +
                "' is not a non-negative integer");
  return v;
}

}  // namespace tri::cli
