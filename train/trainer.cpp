#include "train/trainer.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

#include "framework/autograd.hpp"
#include "framework/distributed.hpp"
#include "framework/profile.hpp"
#include "framework/rng.hpp"
#include "framework/stats.hpp"
#include "framework/stop_signals.hpp"
#include "train/atomic_file.hpp"
#include "train/model_io.hpp"
#include "train/run_log.hpp"

namespace tri::cli {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// For tests that signal a run at a known step: with TRILEMMA_WAIT_FOR_SIGNAL_AT=N in the
// environment, the run says so on stderr after step N and waits there for SIGINT or SIGTERM.
void wait_for_signal_if_asked(int64_t step) {
  static const char* at = std::getenv("TRILEMMA_WAIT_FOR_SIGNAL_AT");
  if (!at || std::strtoll(at, nullptr, 10) != step) return;
  std::fprintf(stderr, "waiting for a signal after step %lld\n", (long long)step);
  std::fflush(stderr);
  stop_signals::wait_for_request();
}

// Whether any rank has received SIGINT or SIGTERM: every rank then stops after the same step.
bool stop_requested_on_any_rank() {
  int64_t requested = stop_signals::requested_signal() != 0;
  dist::allreduce_sum(&requested, 1);
  return requested != 0;
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

// Rows [lo, hi) of a batch: this rank's slice of the global batch.
Batch rows_of(const Batch& b, int64_t lo, int64_t hi) {
  const int64_t T = b.inputs.shape()[1], n = hi - lo;
  auto slice = [&](const IntTensor& t) {
    return IntTensor(Shape{n, T}, {t.data() + lo * T, t.data() + hi * T});
  };
  Batch r{slice(b.inputs), slice(b.targets), {b.mask.begin() + lo * T, b.mask.begin() + hi * T}, {}};
  if (!b.group.empty()) r.group.assign(b.group.begin() + lo, b.group.begin() + hi);
  return r;
}

int64_t scored(const Batch& b) {
  int64_t n = 0;
  for (uint8_t m : b.mask) n += m;
  return n;
}

// Sums every defined gradient and `loss` over the ranks, through one flat buffer (kept between
// steps: a fresh one would cost its page faults every step).
float all_reduce_gradients(const std::vector<Parameter>& params, float loss, std::vector<float>& flat) {
  int64_t n = 1;
  for (const Parameter& p : params)
    if (p.tensor.grad().defined()) n += p.tensor.numel();
  flat.resize(size_t(n));
  int64_t at = 0;
  for (const Parameter& p : params)
    if (const Tensor g = p.tensor.grad(); g.defined()) at = std::copy(g.data(), g.data() + g.numel(), flat.begin() + at) - flat.begin();
  flat[size_t(at)] = loss;
  {
    ProfilePhase phase("allreduce");
    dist::allreduce_sum(flat.data(), n);
  }
  at = 0;
  for (const Parameter& p : params)
    if (const Tensor g = p.tensor.grad(); g.defined()) {
      std::copy(flat.begin() + at, flat.begin() + at + g.numel(), g.data());
      at += g.numel();
    }
  return flat[size_t(at)];
}

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, const Module& model) {
  if (c.optimizer == "sgd") {
    SGDOptions o;
    o.lr = c.lr;
    o.momentum = c.momentum;
    o.weight_decay = c.weight_decay;
    return std::make_unique<SGD>(model.parameters(), o);
  }
  AdamWOptions o;
  o.lr = c.lr;
  o.beta1 = c.beta1;
  o.beta2 = c.beta2;
  o.eps = c.eps;
  o.weight_decay = c.weight_decay;
  return std::make_unique<AdamW>(model.parameters(), o);
}

Trainer::Trainer(const RunConfig& config, const std::string& dir) : config_(config), dir_(dir) {
  const uint64_t seed = uint64_t(config_.run.seed);
  const ScheduleConfig& s = config_.schedule;
  const int64_t steps = config_.run.steps;
  model_ = std::make_unique<LanguageModel>(config_.model, seed_mix(seed, 0));
  opt_ = make_optimizer(config_.optimizer, *model_);
  schedule_ = std::make_unique<LrSchedule>(s.schedule, config_.optimizer.lr, std::min(s.warmup, steps), steps, s.min_lr,
                                           s.decay_fraction);
  train_stream_ = stream_seed(seed, "train");
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
  skipped_steps_ = int64_t(run_value("skipped_steps", 0));
  last_checkpoint_step_ = d.step;
  const int64_t ranks = int64_t(run_value("ranks", 1));
  if (ranks != dist::size() && dist::rank() == 0)
    std::fprintf(stderr, "note: resuming with %d MPI rank(s), the run used %lld: the same batches, but the gradient sums "
                 "group differently, so the bits differ from a run that keeps its ranks\n", dist::size(), (long long)ranks);
}

double Trainer::elapsed() const {
  return elapsed_before_ + std::chrono::duration<double>(Clock::now() - started_).count();
}

EvalSettings Trainer::eval_settings(const std::string& split) const {
  const RunSettings& rs = config_.run;
  const int64_t batches = split == "eval" && rs.final_eval_batches > 0 ? rs.final_eval_batches : rs.eval_batches;
  return {batches, rs.eval_batch, uint64_t(rs.seed), split};
}

// The task's scores and its extra metrics that need no decoding (copy's gen_acc is eval's), on
// the validation stream ("valid") or the held-out test stream ("eval").
EvalResult Trainer::evaluate(const std::string& split) {
  stop_signals::set_activity("evaluation", step_);
  NoGradGuard no_grad;
  model_->eval();
  const EvalSettings s = eval_settings(split);
  EvalResult r = evaluate_task(config_.task, [&](const Batch& b) { return model_->forward(b.inputs); }, s);
  model_->train();
  return r;
}

// Length generalisation: the finished model at each --eval-lengths length, with the task's
// extra metrics, including those that decode (copy's gen_acc).
void Trainer::evaluate_lengths_at_end() {
  if (config_.run.eval_lengths.empty()) return;
  stop_signals::set_activity("evaluation", step_);
  NoGradGuard no_grad;
  model_->eval();
  const EvalSettings s = eval_settings("eval");
  const GreedyDecoder decode = greedy_decoder(*model_);
  length_evals_ = tri::evaluate_lengths(config_.task, config_.run.eval_lengths,
                                        [&](const Batch& b) { return model_->forward(b.inputs); }, s, &decode);
  model_->train();
  for (const EvalResult& r : length_evals_) {
    std::string line = "length " + std::to_string(r.seq_len) + ": token_acc " + fmt("%.4f", r.score.token_acc) +
                       "  seq_acc " + fmt("%.4f", r.score.seq_acc);
    for (const auto& [name, a] : r.extra) line += "  " + name + " " + fmt("%.4f", a.value());
    std::printf("%s\n", line.c_str());
  }
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
  j["params_fnv1a"] = hex64(model_->parameters_fnv1a());
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

int Trainer::run(int64_t stop_at) {
  started_ = Clock::now();
  const RunSettings& rs = config_.run;
  if (step_ >= rs.steps || (early_stopped_ && rs.early_stop > 0 && best_acc_ >= rs.early_stop)) {
    std::printf("the run is already complete at step %lld (%s); nothing to do\n", (long long)step_,
                early_stopped_ ? "stopped early" : "--steps reached");
    return 0;
  }
  early_stopped_ = false;
  set_detect_anomaly(rs.detect_anomaly);
  // Rank 0 prints, logs and writes every file; the other ranks only compute.
  const int rank = dist::rank(), ranks = dist::size();
  std::optional<MetricsLog> log;
  if (rank == 0) log.emplace(dir_, step_ > 0 ? step_ : -1);
  Progress progress(rank == 0 ? rs.progress : "none", step_, rs.steps);
  const int64_t B = rs.batch, T = config_.task.length();
  // This rank's rows of every global batch: the data a run sees does not depend on P.
  const int64_t row_lo = B * rank / ranks, row_hi = B * (rank + 1) / ranks;
  std::vector<float> reduce_buffer;
  const std::vector<Parameter> params = model_->parameters();
  std::printf("training %s on %s: %lld parameters, steps %lld..%lld, batch %lld x %lld tokens\n",
              config_.model.family.c_str(), config_.task.task.c_str(), (long long)model_->num_parameters(),
              (long long)step_ + 1, (long long)rs.steps, (long long)B, (long long)T);
  std::fflush(stdout);

  std::string status = "finished";
  const int64_t first_step = step_;
  int64_t profiled_from = -1;  // the first profiled step (--profile), after a warm-up
  auto interval_start = Clock::now();
  int64_t interval_steps = 0;
  double train_acc = NAN;
  // A signal that came before the first step (while the run was being set up) stops it here.
  bool interrupted = stop_requested_on_any_rank();
  if (interrupted) status = "interrupted";
  while (step_ < rs.steps && !interrupted) {
    if (stop_at >= 0 && step_ >= stop_at) {
      status = "paused";
      break;
    }
    if (profile_ && profiled_from < 0 && step_ >= first_step + kProfileWarmup) {
      profile_enable(true);
      profile_reset();
      profiled_from = step_;
    }
    profile_mark();
    take_anomaly();  // a step's report names only that step's ops
    Batch global, mine;
    {
      stop_signals::set_activity("drawing the batch", step_ + 1);
      ProfilePhase p("make_batch");
      global = make_batch(config_.task, train_stream_, uint64_t(step_), B);
      if (ranks > 1) mine = rows_of(global, row_lo, row_hi);
    }
    const Batch& batch = ranks > 1 ? mine : global;
    stop_signals::set_activity("forward", step_ + 1);
    const Tensor logits = model_->forward(batch.inputs);
    Tensor loss = cross_entropy(logits, batch.targets);
    // With P ranks each loss is its share of the global batch's mean (scored positions here
    // over all scored positions), so the summed gradients are those of the global mean.
    if (ranks > 1) loss = mul_scalar(loss, float(double(scored(batch)) / double(scored(global))));
    stop_signals::set_activity("backward", step_ + 1);
    backward(loss);
    const float loss_value = ranks > 1 ? all_reduce_gradients(params, loss.item(), reduce_buffer) : loss.item();
    double grad_norm;
    stop_signals::set_activity("optimizer step", step_ + 1);
    {
      ProfilePhase p("clip_grad_norm");
      grad_norm = clip_grad_norm(params, config_.optimizer.clip);
    }
    const double lr = schedule_->lr_at(step_);
    // A NaN or Inf in the loss or in any gradient (their joint norm) never reaches the weights:
    // the step is skipped, or the run stops with the last checkpoint as it was.
    if (const double lv = loss_value; !std::isfinite(lv) || !std::isfinite(grad_norm)) {
      const std::string origin = take_anomaly();
      const std::string what =
          "step " + std::to_string(step_ + 1) + ": " +
          (!std::isfinite(lv) ? "the loss is " + fmt("%g", lv) : "the gradient norm is " + fmt("%g", grad_norm)) +
          (!origin.empty()          ? "; the first non-finite value came from " + origin
           : rs.detect_anomaly      ? "; no op produced one (a non-finite input or parameter?)"
                                    : "; --detect-anomaly names the op that produced it");
      opt_->zero_grad();
      if (rs.on_nonfinite == "stop") {
        progress.finish();
        write_summary("nonfinite");
        throw Error(what + "; stopped (--on-nonfinite skip would skip such steps); " +
                    (last_checkpoint_step_ >= 0 ? dir_ + "/last.h5 holds step " + std::to_string(last_checkpoint_step_)
                                                : std::string("no checkpoint was written yet")));
      }
      ++skipped_steps_;
      progress.message(what + "; step skipped (--on-nonfinite skip)");
    } else {
      ProfilePhase p("adamw");
      opt_->set_lr(lr);
      opt_->step();
      opt_->zero_grad();
    }
    ++step_;
    stop_signals::set_activity("logging", step_);
    tokens_seen_ += B * T;
    ++interval_steps;
    last_loss_ = loss_value;

    const double sec = std::chrono::duration<double>(Clock::now() - interval_start).count();
    const bool log_due = step_ % rs.log_every == 0 || step_ == rs.steps;
    // The argmax over B*T*V logits only for logged steps; the bar shows the last logged one.
    if (log_due) {
      const Accuracy a = token_accuracy(logits, batch.targets);
      int64_t counts[2] = {a.correct, a.total};
      dist::allreduce_sum(counts, 2);
      train_acc = Accuracy{counts[0], counts[1]}.value();
    }
    MetricsRow row{step_, "train", last_loss_, train_acc, NAN, grad_norm, lr, 1e3 * sec / double(interval_steps),
                   double(interval_steps * B * T) / sec, elapsed()};
    if (log_due) {
      if (log) log->append(row);
      interval_ms_.push_back(row.ms_per_step);
      interval_start = Clock::now();
      interval_steps = 0;
    }
    progress.step(row, log_due);

    bool write_best = false;
    if (step_ % rs.eval_every == 0 || step_ == rs.steps) {
      last_eval_ = evaluate("valid");
      last_eval_step_ = step_;
      const TaskScore& score = last_eval_.score;
      const bool best = score.token_acc > best_acc_;
      if (best) best_acc_ = score.token_acc, best_step_ = step_;
      early_stopped_ = rs.early_stop > 0 && score.token_acc >= rs.early_stop;
      MetricsRow eval_row;
      eval_row.step = step_;
      eval_row.split = "valid";
      eval_row.loss = score.loss;
      eval_row.acc = score.token_acc;
      eval_row.seq_acc = score.seq_acc;
      eval_row.elapsed_s = elapsed();
      if (log) log->append(eval_row);
      progress.message("valid step " + std::to_string(step_) + ": token_acc " + fmt("%.4f", score.token_acc) +
                       "  seq_acc " + fmt("%.4f", score.seq_acc) + "  loss " + fmt("%.4f", score.loss) +
                       (best ? "  (best)" : ""));
      write_best = best;
      interval_start = Clock::now();  // evaluation time is not training time
      interval_steps = 0;
    }
    wait_for_signal_if_asked(step_);
    interrupted = stop_requested_on_any_rank();
    if (early_stopped_) status = "early_stop";
    if (interrupted) status = "interrupted";
    if (step_ % rs.checkpoint_every == 0 || step_ == rs.steps || early_stopped_ || interrupted)
      save_checkpoint();
    // After last.h5: on a full disk the run stays resumable rather than holding only best.h5.
    if (write_best) save_best_checkpoint();
    if (early_stopped_ || interrupted) break;
  }
  if (status == "paused" || (interrupted && last_checkpoint_step_ != step_)) save_checkpoint();
  stop_signals::set_activity("finishing", step_);
  progress.finish();
  if (profiling()) {
    profile_enable(false);
    std::printf("%s", profile_report(step_ - profiled_from).c_str());
  }
  if (status == "finished" || status == "early_stop") {
    test_eval_ = evaluate("eval");
    evaluate_lengths_at_end();
  }
  write_summary(status);

  std::printf("%s at step %lld/%lld", status.c_str(), (long long)step_, (long long)rs.steps);
  if (test_eval_)
    std::printf(": test token_acc %.4f seq_acc %.4f loss %.4f", test_eval_->score.token_acc,
                test_eval_->score.seq_acc, test_eval_->score.loss);
  if (last_eval_step_ >= 0) std::printf("%s valid token_acc %.4f", test_eval_ ? "," : ":", last_eval_.score.token_acc);
  if (best_step_ >= 0) std::printf(", best valid %.4f at step %lld", best_acc_, (long long)best_step_);
  std::printf("\nparams_fnv1a %s\nrun folder %s (last.h5, best.h5, metrics.jsonl, metrics.csv, summary.json)\n",
              hex64(model_->parameters_fnv1a()).c_str(), dir_.c_str());
  const stop_signals::Request stop = stop_signals::request();
  if (stop.signal != 0)
    std::printf("stopped by %s, which arrived during %s (step %lld)\n", stop_signals::signal_name(stop.signal).c_str(),
                stop.activity.c_str(), (long long)stop.step);
  if (status == "interrupted" || status == "paused")
    std::printf("continue with: %strilemma train --resume %s\n",
                ranks > 1 ? ("mpirun -np " + std::to_string(ranks) + " ").c_str() : "", dir_.c_str());
  // Another rank's signal stops this one too, with the same exit code.
  return stop.signal != 0 ? 128 + stop.signal : status == "interrupted" ? 128 + SIGTERM : 0;
}

}  // namespace tri::cli
