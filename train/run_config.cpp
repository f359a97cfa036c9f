#include "train/run_config.hpp"

#include <algorithm>

#include "framework/runtime/runtime.hpp"
#include "models/family.hpp"
#include "models/position_encodings.hpp"
#include "train/optimizers.hpp"

namespace tri::train {

namespace {
constexpr int64_t kBig = int64_t(1) << 40;
}  // namespace

void OptimizerConfig::visit(FieldVisitor& v) {
  v.choice("optimizer", optimizer, optimizer_names(), optimizers_help("the optimizer:"));
  v.real("lr", lr, {0.0, 10.0}, "peak learning rate");
  v.real("beta1", beta1, {0.0, 0.999999}, "adamw beta1");
  v.real("beta2", beta2, {0.0, 0.999999999}, "adamw beta2");
  v.real("eps", eps, {1e-30, 1.0}, "adamw epsilon");
  v.real("weight-decay", weight_decay, {0.0, 10.0},
         "decoupled (adamw) or L2 (sgd) weight decay; never on norms, biases, embeddings");
  v.real("momentum", momentum, {0.0, 0.999999}, "sgd momentum");
  v.real("clip", clip, {0.0, 1e12}, "global grad-norm clip; 0 = off");
}

void ScheduleConfig::visit(FieldVisitor& v) {
  v.choice("schedule", schedule, schedule_names(), schedules_help("learning rate after warm-up:"));
  v.integer("warmup", warmup, {0, kBig}, "linear warm-up steps (beyond --steps: warm-up throughout)");
  v.real("min-lr", min_lr, {0.0, 10.0}, "cosine and wsd schedules: final learning rate (at most --lr)");
  v.real("decay-fraction", decay_fraction, {0.0, 1.0}, "wsd schedule: the share of the steps over which it decays",
         FieldAge::added_later);
}

void RunSettings::visit(FieldVisitor& v) {
  v.integer("batch", batch, {1, 1 << 20}, "rows per training batch");
  v.integer("micro-batches", micro_batches, {1, 1 << 20},
            "forward and backward passes per step, each over its share of the batch's rows, their gradients "
            "summed before one update: the same step to float32 rounding, with activations K times smaller "
            "(less memory; faster where a step's tensors outgrow the caches). Its own bits per K",
            {}, FieldAge::added_later);
  v.choice("precision", precision, {"fp32", "bf16"},
           "the GEMMs' inputs: fp32, or bf16 (rounded to bfloat16, summed in float32 into float32 outputs; weights, "
           "optimizer state, norms, softmax, losses, scans and every other op stay float32). bf16 needs a CPU "
           "with AVX512_BF16 or AMX (trilemma info)", FieldAge::added_later);
  v.integer("steps", steps, {1, kBig}, "training steps");
  v.integer("eval-every", eval_every, {1, kBig}, "steps between evaluations (and at the last step)");
  v.integer("eval-batches", eval_batches, {1, 1 << 20}, "batches per periodic evaluation (validation stream)");
  v.integer("final-eval-batches", final_eval_batches, {0, 1 << 20},
            "batches of the final evaluation on the held-out test stream, the accuracy the run reports; "
            "0 = --eval-batches", {}, FieldAge::added_later);
  v.integer("eval-batch", eval_batch, {1, 1 << 20}, "rows per evaluation batch",
            zero_means("--batch", [](const FieldLookup& l) { return l.integer("batch").value_or(0); }));
  v.real("early-stop", early_stop, {0.0, 1.0},
         "stop once evaluation token accuracy reaches ACC (Zoology: 0.99); 0 = never");
  v.integer("checkpoint-every", checkpoint_every, {1, kBig}, "steps between last.h5 checkpoints",
            zero_means("at every evaluation",
                       [](const FieldLookup& l) { return l.integer("eval-every").value_or(0); }));
  v.integer("keep", keep, {0, 1 << 20}, "also keep the last K checkpoints as step-NNNNNNN.h5; 0 = only last.h5 and best.h5");
  v.integer("seed", seed, {0, INT64_MAX}, "seed of the initialisation and of the data streams");
  v.integer("log-every", log_every, {1, kBig}, "steps between metrics rows");
  v.choice("progress", progress, {"auto", "bar", "lines", "none"},
           "auto (a bar on a terminal, else lines), bar, lines or none");
  v.choice("on-nonfinite", on_nonfinite, {"stop", "skip"},
           "a NaN or Inf in the loss or the gradients: stop (the last checkpoint stays) or skip the step",
           FieldAge::added_later);
  v.boolean("detect-anomaly", detect_anomaly,
            "check every op's output and gradient for NaN/Inf and name the first op that made one (slower)",
            FieldAge::added_later);
  v.optional_int_list("eval-lengths", eval_lengths, {1, 1 << 24},
                      "after the last step, evaluate at these sequence lengths too (length "
                      "generalisation; copy: strings filling each length); empty = none");
  v.text("out", out, "run folder; empty = checkpoints/<run-name>");
  v.text("run-name", run_name, "empty = the --out folder's name, or <model>-<task>-<date>-<time>");
}

void RuntimeConfig::visit(FieldVisitor& v) {
  v.integer("threads", threads, {1, 4096}, "threads for OpenMP, oneDNN and OpenBLAS together",
            zero_means("the physical cores", [](const FieldLookup&) { return int64_t(physical_cores()); }));
  v.choice("gemm", gemm, gemm_backend_names(), "GEMM backend: " + gemm_backend_names(", ") + " (auto: oneDNN)");
}

void RuntimeConfig::apply() const {
  set_gemm_backend(gemm);
  set_threads(int(threads));
}

RunConfig RunConfig::of(const std::string& family, const std::string& task) {
  RunConfig c;
  c.task = TaskConfig::of(task);
  c.model = ModelConfig::of(family);
  return c;
}

RunConfig RunConfig::from_text(const TextMap& text) {
  auto name = [&](const char* key) {
    auto it = text.find(key);
    if (it == text.end()) throw Error(std::string("config: missing --") + key);
    return it->second;
  };
  RunConfig c = of(name("model"), name("task"));
  read_text(c, text, /*require_all=*/true);
  c.resolve();
  c.validate();
  return c;
}

void RunConfig::visit(FieldVisitor& v) {
  task.visit(v);
  model.visit(v);
  optimizer.visit(v);
  schedule.visit(v);
  run.visit(v);
  runtime.visit(v);
}

void RunConfig::resolve() {
  resolve_zeros(*this);
  model.vocab = task.vocab_size();
}

void RunConfig::validate() const {
  task.validate();  // each checks its own ranges
  model.validate();
  for (const Options* part : std::initializer_list<const Options*>{&optimizer, &schedule, &run, &runtime})
    check_ranges(*part);
  if (model.vocab != task.vocab_size())
    throw Error("model vocab " + std::to_string(model.vocab) + " differs from the task's " +
                std::to_string(task.vocab_size()));
  if (run.micro_batches > run.batch)
    throw Error("--micro-batches " + std::to_string(run.micro_batches) + " is out of range (allowed: 1.." +
                std::to_string(run.batch) + ", at most --batch)");
  if (schedule.min_lr > optimizer.lr)
    throw Error("--min-lr " + exact_number(schedule.min_lr) + " is out of range (allowed: 0.." +
                exact_number(optimizer.lr) + ", at most --lr)");
  for (int64_t L : run.eval_lengths) {
    TaskConfig at = task;
    at.behaviour().set_length(at, L);
    try {
      at.validate();
    } catch (const Error& e) {
      throw Error("--eval-lengths " + std::to_string(L) + ": " + e.what());
    }
    check_position_limit(model, L, "--eval-lengths " + std::to_string(L));
  }
  check_position_limit(model, task.length(), "--seq-len " + std::to_string(task.length()));
}

namespace {

class JsonWriter : public FieldVisitor {
 public:
  explicit JsonWriter(Json& out) : out_(out) {}
  void on(const IntSpec& f, int64_t& v) override { out_[f.key] = v; }
  void on(const RealSpec& f, double& v) override { out_[f.key] = v; }
  void on(const BoolSpec& f, bool& v) override { out_[f.key] = v; }
  void on(const ChoiceSpec& f, std::string& v) override { out_[f.key] = v; }
  void on(const IntListSpec& f, std::vector<int64_t>& v) override { out_[f.key] = v; }
  void on(const TextSpec& f, std::string& v) override { out_[f.key] = v; }

 private:
  Json& out_;
};

}  // namespace

std::string config_file_text(const TextMap& text) {
  std::string s;
  for (const auto& [k, v] : text) s += k + " = " + v + "\n";
  return s;
}

Json config_json(const Options& o) {
  Json j = Json::object();
  JsonWriter w(j);
  const_cast<Options&>(o).visit(w);  // JsonWriter only reads the fields
  return j;
}

std::vector<std::string> owners_of(const std::string& key) {
  std::vector<std::string> owners;
  auto has = [&](const Options& o) {
    const std::vector<std::string> keys = field_keys(o);
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  };
  for (const FamilySpec* f : families())
    if (has(*f->options())) owners.push_back(f->name);
  for (const TaskSpec* t : tasks())
    if (has(*t->options())) owners.push_back(t->name);
  return owners;
}

}  // namespace tri::train
