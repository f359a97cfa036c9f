// A training run: a LanguageModel learning a synthetic task with AdamW (or SGD), a warm-up and a
// decay schedule (wsd by default) and gradient clipping, evaluated on the task's held-out stream, with
// checkpoints, metrics files and a summary in its run folder:
//   config.ini      the resolved config (readable again with --config)
//   metrics.jsonl   the metrics rows, one JSON object per line: a training row every
//   metrics.csv     --log-every steps and an evaluation row every --eval-every steps; the CSV
//                   file holds the same rows
//   last.h5         the latest checkpoint (every --checkpoint-every steps, at the end, on
//                   SIGINT/SIGTERM); best.h5 at the best evaluation; step-NNNNNNN.h5 with --keep
//   summary.json    the outcome, written when the run stops for any reason
// Step s trains on batch s of the task's training stream, so a resumed run sees exactly the
// batches an uninterrupted one would and reaches the same bits.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/evaluate.hpp"
#include "framework/optim/optim.hpp"
#include "models/lm.hpp"
#include "train/checkpoint.hpp"
#include "train/optimizers.hpp"
#include "train/run_config.hpp"

namespace tri::train {

class Trainer {
 public:
  // `config` is resolved and validated (RunConfig::resolve, validate); `dir` is the run folder.
  Trainer(const RunConfig& config, const std::string& dir);

  // Continues from a checkpoint of this run: parameters, optimizer state, step, bookkeeping.
  void resume(const std::string& checkpoint);

  // Trains until --steps, the early-stop accuracy, step `stop_at` (-1: no such stop; 0: before
  // the first step, a checkpoint of the initial weights) or
  // SIGINT/SIGTERM, always leaving last.h5 and summary.json behind. Returns the exit code:
  // 0, or 128 + the signal number after an interruption.
  int run(int64_t stop_at);
  // --profile: time per op kind over the steps after the first kProfileWarmup of this
  // invocation, printed at the end (framework/runtime/profile.hpp).
  void set_profile(bool on) { profile_ = on; }
  static constexpr int64_t kProfileWarmup = 2;

  const LanguageModel& model() const { return *model_; }

 private:
  RunConfig config_;
  std::string dir_;
  std::unique_ptr<LanguageModel> model_;
  std::unique_ptr<Optimizer> opt_;
  std::unique_ptr<LrSchedule> schedule_;
  uint64_t train_stream_;
  bool profile_ = false;

  // Progress, saved in every checkpoint.
  int64_t step_ = 0, tokens_seen_ = 0;
  int64_t skipped_steps_ = 0;          // steps with a non-finite loss or gradient, skipped
  int64_t last_checkpoint_step_ = -1;  // of last.h5 (-1: none written or loaded yet)
  double best_acc_ = -1;
  int64_t best_step_ = -1;
  bool early_stopped_ = false;
  double elapsed_before_ = 0;  // seconds spent by earlier invocations of this run

  // This invocation.
  std::chrono::steady_clock::time_point started_;
  double last_loss_ = NAN;
  EvalResult last_eval_;  // the last periodic evaluation, on the validation stream
  int64_t last_eval_step_ = -1;
  std::optional<EvalResult> test_eval_;  // on the held-out test stream, once the run is complete
  std::vector<double> interval_ms_;     // ms per step of each logged interval
  std::vector<EvalResult> length_evals_;  // at --eval-lengths, once the run is complete

  // The steps of run(): one invocation's loop state, one step's forward and backward, then
  // the update or the non-finite policy, the log, the evaluation, the checkpoint, the end.
  struct Loop;
  struct StepResult;
  void begin_loop(Loop& loop);
  StepResult forward_backward(Loop& loop);
  void update(double lr);
  void skip_nonfinite_step(Loop& loop, const StepResult& r);
  void log_step(Loop& loop, const StepResult& r);
  // Whether step s (counted from 1) writes a metrics row: every --log-every steps and the last.
  bool logs_step(int64_t s) const { return s % config_.run.log_every == 0 || s == config_.run.steps; }
  bool evaluate_if_due(Loop& loop);
  void checkpoint_if_due(const Loop& loop, bool write_best);
  int finish(Loop& loop);

  double elapsed() const;
  EvalSettings eval_settings(const std::string& split) const;  // "valid" or "eval": batches, rows, seed
  EvalResult evaluate(const std::string& split);
  void evaluate_lengths_at_end();
  CheckpointData checkpoint_data() const;
  void save_checkpoint();       // last.h5 (and step-N.h5 copies with --keep)
  void save_best_checkpoint();  // best.h5 (a copy of last.h5 when that holds this step)
  void copy_last_checkpoint(const std::string& path) const;
  void write_summary(const std::string& status) const;
  bool summary_is_final() const;  // summary.json records a finished or early-stopped run
  std::string params_hash() const;  // params_fnv1a as 16 hex digits (summary.json, the closing lines)
};

}  // namespace tri::train
