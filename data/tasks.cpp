// The task registry, the fields every task shares, and batches drawn row by row.
#include "data/tasks.hpp"

#include <typeinfo>

#include "framework/config/registry.hpp"
#include "framework/core/argmax.hpp"

namespace tri {

// The built-in tasks, each defined in its own file.
TaskSpec copy_task();            // data/task_copy.cpp
TaskSpec selective_copy_task();  // data/task_selective_copy.cpp
TaskSpec mqar_task();            // data/task_mqar.cpp
TaskSpec induction_task();       // data/task_induction.cpp
TaskSpec needle_task();          // data/task_needle.cpp

namespace {

Registry<TaskSpec>& registry() {
  static Registry<TaskSpec> r("--task", {copy_task(), selective_copy_task(), mqar_task(), induction_task(), needle_task()});
  return r;
}

}  // namespace

void register_task(TaskSpec spec) { registry().add(std::move(spec)); }

const TaskSpec& task_spec(const std::string& name) { return registry().find(name); }
std::vector<std::string> task_names() { return registry().names(); }
std::vector<const TaskSpec*> tasks() { return registry().all(); }

Accuracy& extra_score(ExtraScores& scores, const std::string& name) {
  for (auto& [n, a] : scores)
    if (n == name) return a;
  scores.push_back({name, Accuracy{}});
  return scores.back().second;
}

std::map<int64_t, Accuracy> accuracy_by_group(const Batch& batch, const Tensor& logits) {
  const int64_t V = logits.size(-1), B = batch.inputs.shape()[0], T = batch.inputs.shape()[1];
  std::map<int64_t, Accuracy> by;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t i = b * T + t;
      if (!batch.mask[size_t(i)]) continue;
      Accuracy& a = by[batch.group[size_t(b)]];
      a.correct += argmax(logits.data() + i * V, V) == batch.targets.data()[i];
      ++a.total;
    }
  return by;
}

// ---- TaskConfig ----------------------------------------------------------------------------

TaskConfig::TaskConfig() : options(task_spec(task).options()) {}

TaskConfig TaskConfig::of(const std::string& name) {
  TaskConfig c;
  c.task = name;
  c.options = OptionsBox<TaskOptions>(task_spec(name).options());
  return c;
}

int64_t TaskConfig::length() const { return seq_len ? seq_len : options->default_seq_len(); }

int64_t TaskConfig::vocab_size() const {
  if (const int64_t fixed = options->fixed_vocab()) return fixed;
  return vocab ? vocab : options->default_vocab();
}

void TaskConfig::visit(FieldVisitor& v) {
  v.choice("task", task, task_names(), registry().help("the task:"));
  v.integer("seq-len", seq_len, {1, int64_t(1) << 24}, "row length",
            zero_means("the task's default (copy 2*max-len+3, mqar 128, others 256)",
                       [this](const FieldLookup&) { return length(); }));
  v.integer("vocab", vocab, {2, int64_t(1) << 30}, "vocabulary (copy: alphabet + 4)",
            zero_means("the task's default (16; mqar and needle 8192)",
                       [this](const FieldLookup&) { return vocab_size(); }));
  if (options) options->visit(v);
}

void TaskConfig::validate() const {
  const TaskSpec& spec = task_spec(task);
  if (!options || std::type_index(typeid(*options)) != spec.options_type)
    throw Error("task config: the options are not those of task '" + task + "' (set task through TaskConfig::of)");
  check_ranges(*this);
  const int64_t fixed = options->fixed_vocab();
  if (fixed && vocab && vocab != fixed)
    throw Error("task " + task + ": --vocab " + std::to_string(vocab) + " does not fit (the task's options fix it at " +
                std::to_string(fixed) + ")");
  options->validate(*this);
}

// ---- streams and batches -------------------------------------------------------------------

void TaskOptions::set_length(TaskConfig& c, int64_t seq_len) const { c.seq_len = seq_len; }

uint64_t stream_seed(uint64_t base_seed, const std::string& split) {
  if (split == "train") return seed_mix(base_seed, 0x7472'6169'6E00'0001ull);
  if (split == "eval") return seed_mix(base_seed, 0x6576'616C'0000'0002ull);
  if (split == "valid") return seed_mix(base_seed, 0x7661'6C69'6400'0003ull);
  throw unknown_name("split", split, {"train", "valid", "eval"});
}

Batch make_batch(const TaskConfig& cfg, uint64_t seed, uint64_t batch_index, int64_t batch_size) {
  cfg.validate();
  if (batch_size < 1) throw Error("make_batch: batch_size " + std::to_string(batch_size) + " must be >= 1");
  const int64_t B = batch_size, T = cfg.length();
  std::vector<int32_t> x(size_t(B * T), 0), y(size_t(B * T), kIgnoreIndex);
  Batch batch;
  batch.mask.assign(size_t(B * T), 0);
  const uint64_t batch_seed = seed_mix(seed, batch_index);
  for (int64_t b = 0; b < B; ++b) {
    Row r{x.data() + b * T, y.data() + b * T, batch.mask.data() + b * T, T, b, -1};
    cfg.behaviour().fill_row(cfg, Rng(seed_mix(batch_seed, uint64_t(b))), r);
    if (r.group >= 0) batch.group.push_back(r.group);
  }
  batch.inputs = IntTensor(Shape{B, T}, std::move(x));
  batch.targets = IntTensor(Shape{B, T}, std::move(y));
  return batch;
}

AnswerSpan answer_span(const Batch& batch, int64_t row) {
  const int64_t T = batch.inputs.shape()[1];
  const uint8_t* m = batch.mask.data() + row * T;
  int64_t first = 0;
  while (first < T && !m[first]) ++first;
  int64_t n = 0;
  while (first + n < T && m[first + n]) ++n;
  if (n == 0) throw Error("answer_span: row " + std::to_string(row) + " has no scored position");
  return {first + 1, n};
}

int64_t after_first_occurrence(const int32_t* x, int64_t t) {
  for (int64_t s = 0; s + 1 < t; ++s)
    if (x[s] == x[t]) return s + 1;
  return -1;
}

}  // namespace tri
