// The trainer's files in the run folder: checkpoints (last.h5, best.h5, step-NNNNNNN.h5 with
// --keep) and summary.json.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "framework/core/stats.hpp"
#include "framework/io/atomic_file.hpp"
#include "framework/system/distributed.hpp"
#include "framework/system/stop_signals.hpp"
#include "train/run_records.hpp"
#include "train/trainer.hpp"

namespace tri::train {

namespace fs = std::filesystem;

namespace {

// An evaluation's scores and the task's extra metrics, as the records hold them.
template <class T>
T scores_of(const EvalResult& r) {
  T s;
  s.token_acc = r.score.token_acc, s.seq_acc = r.score.seq_acc, s.loss = r.score.loss;
  for (const auto& [name, a] : r.extra) s.extra.emplace_back(name, a.value());
  return s;
}

StepScores step_scores(const EvalResult& r, int64_t step) {
  StepScores s = scores_of<StepScores>(r);
  s.step = step;
  return s;
}

// Removes the oldest step-NNNNNNN.h5 files beyond the newest `keep`.
void prune_step_checkpoints(const std::string& dir, int64_t keep) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0 && name.size() > 8 && name.substr(name.size() - 3) == ".h5")
      files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());  // zero-padded: lexical order is step order
  for (size_t i = 0; i + size_t(keep) < files.size(); ++i) fs::remove(files[i]);
}

}  // namespace

std::string Trainer::params_hash() const {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)model_->parameters_fnv1a());
  return buf;
}

CheckpointData Trainer::checkpoint_data() const {
  CheckpointData d;
  d.step = step_;
  d.tokens_seen = tokens_seen_;
  write_text(config_, d.config);
  d.rng["init"] = {seed_mix(uint64_t(config_.run.seed), 0)};
  d.rng["data"] = {train_stream_, uint64_t(step_)};  // the next training batch's index
  d.run = {{"best_eval_acc", best_acc_},
           {"best_step", double(best_step_)},
           {"early_stopped", early_stopped_ ? 1.0 : 0.0},
           {"elapsed_s", elapsed()},
           {"skipped_steps", double(skipped_steps_)},
           {"ranks", double(dist::size())}};
  return d;
}

void Trainer::save_checkpoint() {
  stop_signals::set_activity("checkpoint write", step_);
  if (dist::rank() != 0) {  // every rank holds the same state; rank 0 writes it
    last_checkpoint_step_ = step_;
    return;
  }
  write_checkpoint(dir_ + "/last.h5", *model_, *opt_, checkpoint_data());
  last_checkpoint_step_ = step_;
  if (config_.run.keep > 0) {
    char name[32];
    std::snprintf(name, sizeof name, "/step-%07lld.h5", (long long)step_);
    copy_last_checkpoint(dir_ + name);
    prune_step_checkpoints(dir_, config_.run.keep);
  }
}

void Trainer::save_best_checkpoint() {
  stop_signals::set_activity("checkpoint write", step_);
  if (dist::rank() != 0) return;
  const std::string best = dir_ + "/best.h5";
  if (last_checkpoint_step_ == step_) copy_last_checkpoint(best);  // last.h5 holds this step
  else write_checkpoint(best, *model_, *opt_, checkpoint_data());
}

void Trainer::copy_last_checkpoint(const std::string& path) const {
  write_atomically(path, [&](const std::string& tmp) {
    fs::copy_file(dir_ + "/last.h5", tmp, fs::copy_options::overwrite_existing);  // over the empty temporary
  });
}

bool Trainer::summary_is_final() const {
  const std::optional<RunSummary> s = read_summary(dir_ + "/summary.json");
  return s && (s->status == "finished" || s->status == "early_stop");
}

void Trainer::write_summary(const std::string& status) const {
  if (dist::rank() != 0) return;
  const double sec = elapsed();
  RunSummary s;
  s.status = status;
  s.step = step_;
  s.steps = config_.run.steps;
  s.tokens_seen = tokens_seen_;
  if (std::isfinite(last_loss_)) s.final_train_loss = last_loss_;  // NaN: no step this invocation
  s.skipped_steps = skipped_steps_;
  if (test_eval_) s.final_eval = step_scores(*test_eval_, step_);
  if (last_eval_step_ >= 0) s.final_valid = step_scores(last_eval_, last_eval_step_);
  if (best_step_ >= 0) s.best_valid_acc = best_acc_, s.best_step = best_step_;
  s.parameters = model_->num_parameters();
  s.state_bytes_per_sequence = model_->state_bytes(config_.task.length());
  s.state_bytes_per_layer = model_->layer_state_bytes(config_.task.length());
  s.params_fnv1a = params_hash();
  s.elapsed_s = sec;
  if (sec > 0) s.tokens_per_s = double(tokens_seen_) / sec;
  if (!interval_ms_.empty()) s.ms_per_step = median(interval_ms_);  // this invocation's
  s.peak_memory_bytes = memory_peak_bytes();
  s.chance_token_acc = config_.task.behaviour().chance_accuracy(config_.task);
  for (const EvalResult& r : length_evals_) {
    LengthScores l = scores_of<LengthScores>(r);
    l.seq_len = r.seq_len;
    s.lengths.push_back(std::move(l));
  }
  s.config = config_json(config_);
  write_text_atomically(dir_ + "/summary.json", summary_text(s));
}

}  // namespace tri::train
