#include "train/trainer.hpp"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <vector>

#include "data/evaluate.hpp"
#include "framework/autograd.hpp"
#include "framework/rng.hpp"
#include "train/atomic_file.hpp"

namespace tri::cli {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// The first SIGINT/SIGTERM asks the loop to stop after the current step; the handler then
// restores the default, so a second one stops the process at once.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
  std::signal(sig, SIG_DFL);
}

struct StopSignals {
  StopSignals() {
    g_stop_signal = 0;
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
  }
  ~StopSignals() {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  }
};

std::unique_ptr<Optimizer> make_optimizer(const TrainConfig& tc, const Module& model) {
  if (tc.optimizer == "sgd") {
    SGDOptions o;
    o.lr = tc.lr;
    o.momentum = tc.momentum;
    o.weight_decay = tc.weight_decay;
    return std::make_unique<SGD>(model.parameters(), o);
  }
  AdamWOptions o;
  o.lr = tc.lr;
  o.beta1 = tc.beta1;
  o.beta2 = tc.beta2;
  o.eps = tc.eps;
  o.weight_decay = tc.weight_decay;
  return std::make_unique<AdamW>(model.parameters(), o);
}

std::string hex64(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
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

Trainer::Trainer(const ConfigMap& config, const std::string& dir)
    : config_(config),
      dir_(dir),
      task_(task_config(config)),
      model_config_(model_config(config, task_)),
      tc_(train_config(config)) {
  model_ = std::make_unique<LanguageModel>(model_config_, seed_mix(tc_.seed, 0));
  opt_ = make_optimizer(tc_, *model_);
  schedule_ = std::make_unique<LrSchedule>(tc_.schedule, tc_.lr, std::min(tc_.warmup, tc_.steps), tc_.steps, tc_.min_lr);
  train_stream_ = stream_seed(tc_.seed, "train");
}

void Trainer::resume(const std::string& checkpoint) {
  const CheckpointData d = read_checkpoint(checkpoint, *model_, opt_.get());
  auto data = d.rng.find("data");
  if (data == d.rng.end() || data->second.size() != 2 || data->second[0] != train_stream_ ||
      int64_t(data->second[1]) != d.step)
    throw Error("checkpoint " + checkpoint + ": /rng/data does not match the run's seed and step");
  step_ = d.step;
  tokens_seen_ = d.tokens_seen;
  auto run_value = [&](const char* key, double fallback) {
    auto it = d.run.find(key);
    return it == d.run.end() ? fallback : it->second;
  };
  best_acc_ = run_value("best_eval_acc", -1);
  best_step_ = int64_t(run_value("best_step", -1));
  early_stopped_ = run_value("early_stopped", 0) != 0;
  elapsed_before_ = run_value("elapsed_s", 0);
}

double Trainer::elapsed() const {
  return elapsed_before_ + std::chrono::duration<double>(Clock::now() - started_).count();
}

TaskScore Trainer::evaluate() {
  NoGradGuard no_grad;
  model_->eval();
  const LogitsFn logits_of = [&](const IntTensor& ids) { return model_->forward(ids); };
  TaskScore s = evaluate_task(task_, logits_of, tc_.seed, tc_.eval_batches, tc_.eval_batch);
  model_->train();
  return s;
}

CheckpointData Trainer::checkpoint_data() const {
  CheckpointData d;
  d.step = step_;
  d.tokens_seen = tokens_seen_;
  d.config = config_;
  d.rng["init"] = {seed_mix(tc_.seed, 0)};
  d.rng["data"] = {train_stream_, uint64_t(step_)};  // the next training batch's index
  d.run = {{"best_eval_acc", best_acc_},
           {"best_step", double(best_step_)},
           {"early_stopped", early_stopped_ ? 1.0 : 0.0},
           {"elapsed_s", elapsed()}};
  return d;
}

void Trainer::save_checkpoint(Progress& progress) {
  const std::string last = dir_ + "/last.h5";
  write_checkpoint(last, *model_, *opt_, checkpoint_data());
  if (tc_.keep > 0) {
    char name[32];
    std::snprintf(name, sizeof name, "/step-%07lld.h5", (long long)step_);
    write_atomically(dir_ + name, [&](const std::string& tmp) { fs::copy_file(last, tmp); });
    prune_step_checkpoints(dir_, tc_.keep);
  }
}

void Trainer::write_summary(const std::string& status) const {
  const double sec = elapsed();
  std::string s = "{\n";
  auto field = [&](const std::string& key, const std::string& value) {
    s += "  " + json_quote(key) + ": " + value + ",\n";
  };
  field("status", json_quote(status));
  field("step", std::to_string(step_));
  field("steps", std::to_string(tc_.steps));
  field("tokens_seen", std::to_string(tokens_seen_));
  field("final_train_loss", json_number(last_loss_));
  if (last_eval_step_ >= 0)
    field("final_eval", "{\"step\": " + std::to_string(last_eval_step_) +
                            ", \"token_acc\": " + json_number(last_eval_.token_acc) +
                            ", \"seq_acc\": " + json_number(last_eval_.seq_acc) +
                            ", \"loss\": " + json_number(last_eval_.loss) + "}");
  field("best_eval_acc", best_step_ >= 0 ? json_number(best_acc_) : "null");
  field("best_step", best_step_ >= 0 ? std::to_string(best_step_) : "null");
  field("parameters", std::to_string(model_->num_parameters()));
  field("state_bytes_per_sequence", std::to_string(model_->state_bytes(task_.length())));
  field("params_fnv1a", json_quote(hex64(model_->parameters_fnv1a())));
  field("elapsed_s", json_number(sec));
  field("tokens_per_s", json_number(sec > 0 ? double(tokens_seen_) / sec : NAN));
  field("peak_memory_bytes", std::to_string(memory_peak_bytes()));
  std::string cfg = "{";
  for (const auto& [k, v] : config_) cfg += (cfg.size() > 1 ? ", " : "") + json_quote(k) + ": " + json_quote(v);
  s += "  \"config\": " + cfg + "}\n}\n";
  write_text_atomically(dir_ + "/summary.json", s);
}

int Trainer::run(int64_t stop_at) {
  started_ = Clock::now();
  if (step_ >= tc_.steps || (early_stopped_ && tc_.early_stop > 0 && best_acc_ >= tc_.early_stop)) {
    std::printf("the run is already complete at step %lld (%s); nothing to do\n", (long long)step_,
                early_stopped_ ? "stopped early" : "--steps reached");
    return 0;
  }
  early_stopped_ = false;
  StopSignals signals;
  MetricsLog log(dir_, step_ > 0 ? step_ : -1);
  Progress progress(tc_.progress, step_, tc_.steps);
  const int64_t B = tc_.batch, T = task_.length();
  const std::vector<Parameter> params = model_->parameters();
  std::printf("training %s on %s: %lld parameters, steps %lld..%lld, batch %lld x %lld tokens\n",
              model_config_.family.c_str(), task_.task.c_str(), (long long)model_->num_parameters(),
              (long long)step_ + 1, (long long)tc_.steps, (long long)B, (long long)T);
  std::fflush(stdout);

  std::string status = "finished";
  auto interval_start = Clock::now();
  int64_t interval_steps = 0;
  double train_acc = NAN;
  while (step_ < tc_.steps) {
    if (stop_at > 0 && step_ >= stop_at) {
      status = "paused";
      break;
    }
    const Batch batch = make_batch(task_, train_stream_, uint64_t(step_), B);
    const Tensor logits = model_->forward(batch.inputs);
    const Tensor loss = cross_entropy(logits, batch.targets);
    backward(loss);
    const double grad_norm = clip_grad_norm(params, tc_.clip);
    const double lr = schedule_->lr_at(step_);
    opt_->set_lr(lr);
    opt_->step();
    opt_->zero_grad();
    ++step_;
    tokens_seen_ += B * T;
    ++interval_steps;
    last_loss_ = loss.item();

    const double sec = std::chrono::duration<double>(Clock::now() - interval_start).count();
    const bool log_due = step_ % tc_.log_every == 0 || step_ == tc_.steps;
    // The argmax over B*T*V logits only for logged steps; the bar shows the last logged one.
    if (log_due) train_acc = token_accuracy(logits, batch.targets).accuracy();
    MetricsRow row{step_, "train", last_loss_, train_acc, NAN, grad_norm, lr, 1e3 * sec / double(interval_steps),
                   double(interval_steps * B * T) / sec, elapsed()};
    if (log_due) {
      log.append(row);
      interval_start = Clock::now();
      interval_steps = 0;
    }
    progress.step(row, log_due);

    if (step_ % tc_.eval_every == 0 || step_ == tc_.steps) {
      last_eval_ = evaluate();
      last_eval_step_ = step_;
      const bool best = last_eval_.token_acc > best_acc_;
      if (best) best_acc_ = last_eval_.token_acc, best_step_ = step_;
      early_stopped_ = tc_.early_stop > 0 && last_eval_.token_acc >= tc_.early_stop;
      MetricsRow eval_row;
      eval_row.step = step_;
      eval_row.split = "eval";
      eval_row.loss = last_eval_.loss;
      eval_row.acc = last_eval_.token_acc;
      eval_row.seq_acc = last_eval_.seq_acc;
      eval_row.elapsed_s = elapsed();
      log.append(eval_row);
      progress.message("eval step " + std::to_string(step_) + ": token_acc " + fmt("%.4f", last_eval_.token_acc) +
                       "  seq_acc " + fmt("%.4f", last_eval_.seq_acc) + "  loss " + fmt("%.4f", last_eval_.loss) +
                       (best ? "  (best)" : ""));
      if (best) write_checkpoint(dir_ + "/best.h5", *model_, *opt_, checkpoint_data());
      interval_start = Clock::now();  // evaluation time is not training time
      interval_steps = 0;
    }
    const bool interrupted = g_stop_signal != 0;
    if (early_stopped_) status = "early_stop";
    if (interrupted) status = "interrupted";
    if (step_ % tc_.checkpoint_every == 0 || step_ == tc_.steps || early_stopped_ || interrupted)
      save_checkpoint(progress);
    if (early_stopped_ || interrupted) break;
  }
  if (status == "paused") save_checkpoint(progress);
  progress.finish();
  write_summary(status);

  std::printf("%s at step %lld/%lld", status.c_str(), (long long)step_, (long long)tc_.steps);
  if (last_eval_step_ >= 0)
    std::printf(": eval token_acc %.4f seq_acc %.4f loss %.4f", last_eval_.token_acc, last_eval_.seq_acc,
                last_eval_.loss);
  if (best_step_ >= 0) std::printf(", best %.4f at step %lld", best_acc_, (long long)best_step_);
  std::printf("\nparams_fnv1a %s\nrun folder %s (last.h5, best.h5, metrics.jsonl, metrics.csv, summary.json)\n",
              hex64(model_->parameters_fnv1a()).c_str(), dir_.c_str());
  if (status == "interrupted" || status == "paused")
    std::printf("continue with: trilemma train --resume %s\n", dir_.c_str());
  return status == "interrupted" ? 128 + int(g_stop_signal) : 0;
}

}  // namespace tri::cli
