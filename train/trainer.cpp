#include "train/trainer.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/system/distributed.hpp"
#include "framework/runtime/profile.hpp"
#include "framework/runtime/runtime.hpp"
#include "framework/core/rng.hpp"
#include "framework/core/stats.hpp"
#include "framework/system/stop_signals.hpp"
#include "framework/io/atomic_file.hpp"
#include "train/model_io.hpp"
#include "train/run_log.hpp"

namespace tri::train {

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

Trainer::Trainer(const RunConfig& config, const std::string& dir) : config_(config), dir_(dir) {
  set_gemm_precision(precision_of(config_.run.precision));  // bf16 without it: refused before any file is written
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
    std::string line = "length " + std::to_string(r.seq_len) + ": token_acc " + number_text(r.score.token_acc, "%.4f") +
                       "  seq_acc " + number_text(r.score.seq_acc, "%.4f");
    for (const auto& [name, a] : r.extra) line += "  " + name + " " + number_text(a.value(), "%.4f");
    std::printf("%s\n", line.c_str());
  }
}

// One invocation's loop: what run() and its steps share.
struct Trainer::Loop {
  std::optional<MetricsLog> log;  // rank 0 only
  Progress progress;
  int rank = 0, ranks = 1;
  int64_t B = 0, T = 0;
  int64_t row_lo = 0, row_hi = 0;  // this rank's rows of every global batch
  std::vector<Parameter> params;
  std::vector<float> reduce_buffer;
  std::string status = "finished";
  bool interrupted = false;
  int64_t first_step = 0;
  int64_t profiled_from = -1;  // the first profiled step (--profile), after a warm-up
  Clock::time_point interval_start;
  int64_t interval_steps = 0;
  double train_acc = NAN;

  Loop(const std::string& progress_mode, int64_t step, int64_t steps) : progress(progress_mode, step, steps) {}
};

// A step's forward and backward: the batch it trained on, its accuracy when logged, and what the
// update needs.
struct Trainer::StepResult {
  Batch global, mine;
  const Batch* batch = nullptr;  // this rank's rows
  Accuracy accuracy;              // on this rank's rows, for a logged step
  float loss = NAN;
  double grad_norm = NAN, lr = NAN;
};

int Trainer::run(int64_t stop_at) {
  started_ = Clock::now();
  const RunSettings& rs = config_.run;
  if (step_ >= rs.steps || (early_stopped_ && rs.early_stop > 0 && best_acc_ >= rs.early_stop)) {
    if (!summary_is_final()) {
      // Stopped (killed) after its last checkpoint but before its test evaluation and summary:
      // those are still owed, and they depend only on the checkpoint's weights.
      Loop loop("none", step_, rs.steps);
      begin_loop(loop);
      loop.status = early_stopped_ ? "early_stop" : "finished";
      // The last step was evaluated before its checkpoint (its metrics row is logged): again, for
      // the summary, with the same weights and stream.
      last_eval_ = evaluate("valid");
      last_eval_step_ = step_;
      return finish(loop);
    }
    std::printf("the run is already complete at step %lld (%s); nothing to do\n", (long long)step_,
                early_stopped_ ? "stopped early" : "--steps reached");
    return 0;
  }
  early_stopped_ = false;
  set_detect_anomaly(rs.detect_anomaly);
  // Rank 0 prints, logs and writes every file; the other ranks only compute.
  Loop loop(dist::rank() == 0 ? rs.progress : "none", step_, rs.steps);
  begin_loop(loop);
  // A signal that came before the first step (while the run was being set up) stops it here.
  loop.interrupted = stop_requested_on_any_rank();
  if (loop.interrupted) loop.status = "interrupted";
  while (step_ < rs.steps && !loop.interrupted) {
    if (stop_at >= 0 && step_ >= stop_at) {
      loop.status = "paused";
      break;
    }
    StepResult r = forward_backward(loop);
    // A NaN or Inf in the loss or in any gradient (their joint norm) never reaches the weights.
    if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm))
      skip_nonfinite_step(loop, r);
    else
      update(r.lr);
    ++step_;
    log_step(loop, r);
    const bool write_best = evaluate_if_due(loop);
    wait_for_signal_if_asked(step_);
    loop.interrupted = stop_requested_on_any_rank();
    if (early_stopped_) loop.status = "early_stop";
    if (loop.interrupted) loop.status = "interrupted";
    checkpoint_if_due(loop, write_best);
    if (early_stopped_ || loop.interrupted) break;
  }
  return finish(loop);
}

void Trainer::begin_loop(Loop& loop) {
  const RunSettings& rs = config_.run;
  const int rank = dist::rank();
  loop.rank = rank;
  loop.ranks = dist::size();
  if (rank == 0) loop.log.emplace(dir_, step_ > 0 ? step_ : -1);
  loop.B = rs.batch;
  loop.T = config_.task.length();
  // This rank's rows of every global batch: the data a run sees does not depend on P.
  loop.row_lo = loop.B * rank / loop.ranks;
  loop.row_hi = loop.B * (rank + 1) / loop.ranks;
  loop.params = model_->parameters();
  loop.first_step = step_;
  loop.interval_start = Clock::now();
  std::printf("training %s on %s: %lld parameters, steps %lld..%lld, batch %lld x %lld tokens\n",
              config_.model.name().c_str(), config_.task.task.c_str(), (long long)model_->num_parameters(),
              (long long)step_ + 1, (long long)rs.steps, (long long)loop.B, (long long)loop.T);
  std::fflush(stdout);
}

Trainer::StepResult Trainer::forward_backward(Loop& loop) {
  if (profile_ && loop.profiled_from < 0 && step_ >= loop.first_step + kProfileWarmup) {
    profile_enable(true);
    profile_reset();
    loop.profiled_from = step_;
  }
  profile_mark();
  take_anomaly();  // a step's report names only that step's ops
  StepResult r;
  {
    stop_signals::set_activity("drawing the batch", step_ + 1);
    ProfilePhase p("make_batch");
    r.global = make_batch(config_.task, train_stream_, uint64_t(step_), loop.B);
    if (loop.ranks > 1) r.mine = rows_of(r.global, loop.row_lo, loop.row_hi);
  }
  r.batch = loop.ranks > 1 ? &r.mine : &r.global;
  // With P ranks or K micro-batches each pass's loss is its share of the global batch's mean
  // (scored positions in its rows over all scored positions), so the summed gradients are those
  // of the global mean. One pass on one rank keeps the plain mean (and its bits).
  const int64_t K = config_.run.micro_batches, rows = r.batch->inputs.shape()[0];
  const bool shared = loop.ranks > 1 || K > 1;
  const double all_scored = shared ? double(scored(r.global)) : 1.0;
  const bool logged = logs_step(step_ + 1);
  double loss_sum = 0;
  for (int64_t m = 0; m < K; ++m) {
    const int64_t lo = rows * m / K, hi = rows * (m + 1) / K;
    if (lo == hi) continue;  // more micro-batches than this rank's rows
    const Batch part = K > 1 ? rows_of(*r.batch, lo, hi) : Batch{};
    const Batch& b = K > 1 ? part : *r.batch;
    stop_signals::set_activity("forward", step_ + 1);
    const Tensor logits = model_->forward(b.inputs);
    Tensor loss = cross_entropy(logits, b.targets);
    if (shared) loss = mul_scalar(loss, float(double(scored(b)) / all_scored));
    stop_signals::set_activity("backward", step_ + 1);
    backward(loss);
    loss_sum += double(loss.item());  // one pass: float -> double -> float, its bits
    if (logged) r.accuracy.add(token_accuracy(logits, b.targets));  // the argmax only for logged steps
  }
  r.loss = float(loss_sum);
  if (loop.ranks > 1) r.loss = all_reduce_gradients(loop.params, r.loss, loop.reduce_buffer);
  stop_signals::set_activity("optimizer step", step_ + 1);
  {
    ProfilePhase p("clip_grad_norm");
    r.grad_norm = clip_grad_norm(loop.params, config_.optimizer.clip);
  }
  r.lr = schedule_->lr_at(step_);
  return r;
}

void Trainer::update(double lr) {
  ProfilePhase p(config_.optimizer.optimizer.c_str());
  opt_->set_lr(lr);
  opt_->step();
  opt_->zero_grad();
}

// --on-nonfinite: the step is skipped, or the run stops with the last checkpoint as it was.
void Trainer::skip_nonfinite_step(Loop& loop, const StepResult& r) {
  const RunSettings& rs = config_.run;
  const double lv = r.loss;
  const std::string origin = take_anomaly();
  const std::string what =
      "step " + std::to_string(step_ + 1) + ": " +
      (!std::isfinite(lv) ? "the loss is " + number_text(lv, "%g") : "the gradient norm is " + number_text(r.grad_norm, "%g")) +
      (!origin.empty()          ? "; the first non-finite value came from " + origin
       : rs.detect_anomaly      ? "; no op produced one (a non-finite input or parameter?)"
                                : "; --detect-anomaly names the op that produced it");
  opt_->zero_grad();
  if (rs.on_nonfinite == "stop") {
    loop.progress.finish();
    write_summary("nonfinite");
    throw Error(what + "; stopped (--on-nonfinite skip would skip such steps); " +
                (last_checkpoint_step_ >= 0 ? dir_ + "/last.h5 holds step " + std::to_string(last_checkpoint_step_)
                                            : std::string("no checkpoint was written yet")));
  }
  ++skipped_steps_;
  loop.progress.message(what + "; step skipped (--on-nonfinite skip)");
}

// The step's metrics row: every --log-every steps into the metrics files, every step on the bar.
void Trainer::log_step(Loop& loop, const StepResult& r) {
  stop_signals::set_activity("logging", step_);
  tokens_seen_ += loop.B * loop.T;
  ++loop.interval_steps;
  last_loss_ = r.loss;
  const double sec = std::chrono::duration<double>(Clock::now() - loop.interval_start).count();
  const bool log_due = logs_step(step_);
  // The argmax over B*T*V logits only for logged steps; the bar shows the last logged one.
  if (log_due) {
    int64_t counts[2] = {r.accuracy.correct, r.accuracy.total};
    dist::allreduce_sum(counts, 2);
    loop.train_acc = Accuracy{counts[0], counts[1]}.value();
  }
  MetricsRow row{step_, "train", last_loss_, loop.train_acc, NAN, r.grad_norm, r.lr,
                 1e3 * sec / double(loop.interval_steps), double(loop.interval_steps * loop.B * loop.T) / sec,
                 elapsed(), {}};
  if (log_due) {
    if (loop.log) loop.log->append(row);
    interval_ms_.push_back(row.ms_per_step);
    loop.interval_start = Clock::now();
    loop.interval_steps = 0;
  }
  loop.progress.step(row, log_due);
}

// Every --eval-every steps and at the last: the validation stream, the best accuracy and the
// early stop. Whether this step is the best so far (best.h5 is written after last.h5).
bool Trainer::evaluate_if_due(Loop& loop) {
  const RunSettings& rs = config_.run;
  if (step_ % rs.eval_every != 0 && step_ != rs.steps) return false;
  last_eval_ = evaluate("valid");
  last_eval_step_ = step_;
  const TaskScore& score = last_eval_.score;
  // The task's reading of the evaluation (mqar's mix: its lowest accuracy over K) chooses.
  const double acc = config_.task.behaviour().stopping_accuracy(score.token_acc, last_eval_.extra);
  const bool best = acc > best_acc_;
  if (best) best_acc_ = acc, best_step_ = step_;
  early_stopped_ = rs.early_stop > 0 && acc >= rs.early_stop;
  MetricsRow eval_row;
  eval_row.step = step_;
  eval_row.split = "valid";
  eval_row.loss = score.loss;
  eval_row.acc = score.token_acc;
  eval_row.seq_acc = score.seq_acc;
  eval_row.elapsed_s = elapsed();
  for (const auto& [name, a] : last_eval_.extra) eval_row.extra.emplace_back(name, a.value());
  if (loop.log) loop.log->append(eval_row);
  loop.progress.message("valid step " + std::to_string(step_) + ": token_acc " + number_text(score.token_acc, "%.4f") +
                        "  seq_acc " + number_text(score.seq_acc, "%.4f") + "  loss " + number_text(score.loss, "%.4f") +
                        (acc != score.token_acc ? "  stopping accuracy " + number_text(acc, "%.4f") : "") +
                        (best ? "  (best)" : ""));
  loop.interval_start = Clock::now();  // evaluation time is not training time
  loop.interval_steps = 0;
  return best;
}

void Trainer::checkpoint_if_due(const Loop& loop, bool write_best) {
  const RunSettings& rs = config_.run;
  if (step_ % rs.checkpoint_every == 0 || step_ == rs.steps || early_stopped_ || loop.interrupted) save_checkpoint();
  // After last.h5: on a full disk the run stays resumable rather than holding only best.h5.
  if (write_best) save_best_checkpoint();
}

// The last checkpoint, the profile, the test-stream evaluation of a complete run, the summary
// and the closing lines. The exit code: 0, or 128 + the signal that stopped the run.
int Trainer::finish(Loop& loop) {
  const RunSettings& rs = config_.run;
  const std::string& status = loop.status;
  if (status == "paused" || (loop.interrupted && last_checkpoint_step_ != step_)) save_checkpoint();
  stop_signals::set_activity("finishing", step_);
  loop.progress.finish();
  if (profiling()) {
    profile_enable(false);
    std::printf("%s", profile_report(step_ - loop.profiled_from).c_str());
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
              params_hash().c_str(), dir_.c_str());
  const stop_signals::Request stop = stop_signals::request();
  if (stop.signal != 0)
    std::printf("stopped by %s, which arrived during %s (step %lld)\n", stop_signals::signal_name(stop.signal).c_str(),
                stop.activity.c_str(), (long long)stop.step);
  if (status == "interrupted" || status == "paused")
    std::printf("continue with: %strilemma train --resume %s\n",
                loop.ranks > 1 ? ("mpirun -np " + std::to_string(loop.ranks) + " ").c_str() : "", dir_.c_str());
  // Another rank's signal stops this one too, with the same exit code.
  return stop.signal != 0 ? 128 + stop.signal : status == "interrupted" ? 128 + SIGTERM : 0;
}

}  // namespace tri::train
