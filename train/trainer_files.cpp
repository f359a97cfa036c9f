// The trainer's files in the run folder: checkpoints (last.h5, best.h5, step-NNNNNNN.h5 with
// --keep) and summary.json.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "framework/core/stats.hpp"
#include "framework/io/atomic_file.hpp"
#include "framework/system/distributed.hpp"
#include "framework/system/stop_signals.hpp"
#include "train/trainer.hpp"

namespace tri::train {

namespace fs = std::filesystem;

namespace {

Json eval_json(const EvalResult& r, int64_t step) {
  Json j = {{"step", step}, {"token_acc", r.score.token_acc}, {"seq_acc", r.score.seq_acc}, {"loss", r.score.loss}};
  for (const auto& [name, a] : r.extra) j[name] = a.value();
  return j;
}

Json length_json(const EvalResult& r) {
  Json extra = Json::object();
  for (const auto& [name, a] : r.extra) extra[name] = a.value();
  return {{"seq_len", r.seq_len}, {"token_acc", r.score.token_acc}, {"seq_acc", r.score.seq_acc},
          {"loss", r.score.loss}, {"extra", extra}};
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

void Trainer::write_summary(const std::string& status) const {
  if (dist::rank() != 0) return;
  const double sec = elapsed();
  Json j;
  j["status"] = status;
  j["step"] = step_;
  j["steps"] = config_.run.steps;
  j["tokens_seen"] = tokens_seen_;
  j["final_train_loss"] = last_loss_;  // NaN (no step this invocation) is written as null
  j["skipped_steps"] = skipped_steps_;  // non-finite loss or gradients (--on-nonfinite skip)
  // The reported accuracy: the held-out test stream, once the run is complete; the validation
  // stream's last evaluation, which chose when to stop and which checkpoint is best, beside it.
  j["final_eval"] = test_eval_ ? eval_json(*test_eval_, step_) : Json();
  j["final_valid"] = last_eval_step_ >= 0 ? eval_json(last_eval_, last_eval_step_) : Json();
  j["best_valid_acc"] = best_step_ >= 0 ? Json(best_acc_) : Json();
  j["best_step"] = best_step_ >= 0 ? Json(best_step_) : Json();
  j["parameters"] = model_->num_parameters();
  j["state_bytes_per_sequence"] = model_->state_bytes(config_.task.length());
  j["state_bytes_per_layer"] = model_->layer_state_bytes(config_.task.length());
  j["params_fnv1a"] = params_hash();
  j["elapsed_s"] = sec;
  j["tokens_per_s"] = sec > 0 ? double(tokens_seen_) / sec : NAN;
  j["ms_per_step"] = interval_ms_.empty() ? Json() : Json(median(interval_ms_));  // this invocation's
  j["peak_memory_bytes"] = memory_peak_bytes();
  j["chance_token_acc"] = config_.task.behaviour().chance_accuracy(config_.task);
  Json lengths = Json::array();
  for (const EvalResult& r : length_evals_) lengths.push_back(length_json(r));
  j["lengths"] = lengths;
  j["config"] = config_json(config_);
  write_text_atomically(dir_ + "/summary.json", j.dump(2) + "\n");
}

}  // namespace tri::train
