// A training run's configuration, typed: the task, the model, the optimizer, the schedule, the
// run's own settings and the runtime. It is parsed once (from the command line and config file,
// or from a checkpoint's /config) into these structs; text is only for saving it (config.ini,
// the checkpoint's /config attributes, under the CLI names) and for printing it, and JSON for
// summary.json. Every field's default, range, "0 means" rule and help sit in its struct's
// visit() (models/config.hpp, data/tasks.hpp and the families' and tasks' own files for theirs).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "data/tasks.hpp"
#include "framework/config/options.hpp"
#include "models/config.hpp"

namespace tri::train {

using Json = nlohmann::ordered_json;

struct OptimizerConfig : Options {
  std::string optimizer = "adamw";  // a registered optimizer (train/optimizers.hpp): adamw | sgd
  double lr = 1e-3;                 // the peak learning rate, the run's one copy of it
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;  // beta2: the recipe's (docs/CALIBRATION.md)
  double weight_decay = 0.1;        // decoupled (adamw) or L2 (sgd); never on norms, biases, embeddings
  double momentum = 0;              // sgd
  double clip = 1;                  // global grad-norm clip; 0 = off
  void visit(FieldVisitor& v) override;
  std::unique_ptr<Options> clone() const override { return std::make_unique<OptimizerConfig>(*this); }
};

struct ScheduleConfig : Options {
  std::string schedule = "wsd";     // a registered schedule (framework/optim/optim.hpp): wsd (the recipe's) | cosine | constant, after a linear warm-up
  int64_t warmup = 50;
  double min_lr = 0;                // cosine, wsd: the learning rate at the last step
  double decay_fraction = 0.2;      // wsd: the last share of the steps, decaying to min_lr
  void visit(FieldVisitor& v) override;
  std::unique_ptr<Options> clone() const override { return std::make_unique<ScheduleConfig>(*this); }
};

// How long the run trains, how it evaluates, checkpoints and reports, and where.
struct RunSettings : Options {
  int64_t batch = 32, steps = 1000;
  int64_t micro_batches = 1;     // each step's batch in this many forward and backward passes
  std::string precision = "fp32";  // of the GEMMs' inputs: fp32 | bf16 (runtime.hpp)
  int64_t eval_every = 100, eval_batches = 4;
  int64_t final_eval_batches = 0;  // of the final evaluation on the test stream; 0: eval_batches
  int64_t eval_batch = 0;        // rows per evaluation batch; 0: batch
  double early_stop = 0;         // stop once evaluation token accuracy >= this; 0 = never
  int64_t checkpoint_every = 0;  // 0: eval-every
  int64_t keep = 0;              // also keep the last K checkpoints as step-NNNNNNN.h5
  int64_t seed = 0;              // of the initialisation and of the data streams
  int64_t log_every = 10;
  std::string progress = "auto";  // auto | bar | lines | none
  std::string on_nonfinite = "stop";  // a NaN/Inf loss or gradient: stop | skip (the step)
  bool detect_anomaly = false;    // name the first op whose output or gradient is not finite
  std::vector<int64_t> eval_lengths;  // after training, evaluate at these sequence lengths too
  std::string out, run_name;      // the run folder and its name; empty: chosen at start
  void visit(FieldVisitor& v) override;
  std::unique_ptr<Options> clone() const override { return std::make_unique<RunSettings>(*this); }
};

// The options every command takes: threads and the GEMM backend, applied once per process.
struct RuntimeConfig : Options {
  int64_t threads = 0;         // for OpenMP, oneDNN and OpenBLAS together; 0: the physical cores
  std::string gemm = "auto";   // auto (oneDNN) | dnnl | openblas
  void visit(FieldVisitor& v) override;
  std::unique_ptr<Options> clone() const override { return std::make_unique<RuntimeConfig>(*this); }
  void apply() const;          // sets the threads and the backend; resolved and checked first
};

struct RunConfig : Options {
  TaskConfig task;
  ModelConfig model;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  RunSettings run;
  RuntimeConfig runtime;

  // The defaults of a model family on a task.
  static RunConfig of(const std::string& family, const std::string& task);
  // A saved config (config.ini, a checkpoint's /config): every field of its model and task
  // must be there (fixed conventions may be missing); keys of other families and tasks are
  // ignored. Resolved and validated; an Error names --key and the value.
  static RunConfig from_text(const TextMap& text);

  // task, model, optimizer, schedule, run, runtime: each field after those its rule reads.
  void visit(FieldVisitor& v) override;
  std::unique_ptr<Options> clone() const override { return std::make_unique<RunConfig>(*this); }
  // Replaces every "0 means ..." by its value (seq-len, vocab, max-seq-len, dt-rank, eval-batch,
  // checkpoint-every, threads) and gives the model the task's vocabulary.
  void resolve();
  // Every part, then across them: min-lr <= lr, learned positions covering seq-len.
  void validate() const;
};

// The families and tasks that declare option `key` (empty for a shared option or an unknown key).
std::vector<std::string> owners_of(const std::string& key);

// `key = value` lines, sorted, as --config reads them (config.ini).
std::string config_file_text(const TextMap& text);

// Every field as typed JSON (integers, numbers, booleans, strings, lists) under its key.
Json config_json(const Options& o);

}  // namespace tri::train
