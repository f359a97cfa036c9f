// trilemma eval CHECKPOINT: a trained model on its task's evaluation stream, at the trained
// length or at several (--lengths: length generalisation), as a table or one JSON object.
// Task options given on the command line override the checkpoint's task; --dump writes the
// first evaluated batch with its logits to HDF5 (scripts/interop_check.py replays it in PyTorch).
#include <algorithm>
#include <cstdio>
#include <string>

#include "data/batch_dump.hpp"
#include "data/evaluate.hpp"
#include "framework/core/autograd.hpp"
#include "framework/runtime/runtime.hpp"
#include "models/position_encodings.hpp"
#include "cli/cli_options.hpp"
#include "train/model_io.hpp"

namespace tri::cli {

using namespace tri::train;

namespace {

constexpr int64_t kMaxLength = int64_t(1) << 24;

// The checkpoint's task with the task options given now. A new task starts from its defaults
// with the model's vocabulary (unless its options fix one, as copy's alphabet does); the saved
// seq-len falls back to the task's default when that default moves (another task, or copy's
// --max-len), unless --seq-len is given too.
TaskConfig overridden_task(const TaskConfig& saved, const po::variables_map& vm) {
  TaskConfig t = saved;
  if (given(vm, "task") && vm["task"].as<std::string>() != saved.task) {
    t = as_usage_error([&] { return TaskConfig::of(vm["task"].as<std::string>()); });
    if (!t.behaviour().fixed_vocab()) t.vocab = saved.vocab_size();
  }
  read_given(vm, t);
  refuse_foreign(vm, t, task_options(false), "task " + t.task);
  if (t.behaviour().fixed_vocab() && !given(vm, "vocab")) t.vocab = 0;  // follows the options
  if (!given(vm, "seq-len") && (t.task != saved.task ||
                                t.behaviour().default_seq_len() != saved.behaviour().default_seq_len()))
    t.seq_len = 0;
  as_usage_error([&] {
    resolve_zeros(t);
    t.validate();
    return 0;
  });
  return t;
}

std::string task_words(const TaskConfig& t) {
  return "task " + t.task + " (vocab " + std::to_string(t.vocab_size()) + ")";
}

// The lengths to evaluate, each checked against the task and the learned positions' table.
std::vector<int64_t> eval_lengths(const po::variables_map& vm, const TaskConfig& task, const ModelConfig& model) {
  const bool listed = vm.count("lengths");
  const std::string option = listed ? "--lengths" : "--seq-len";
  const std::vector<int64_t> lengths =
      listed ? as_usage_error([&] { return parse_int_list("lengths", vm["lengths"].as<std::string>(), {1, kMaxLength}); })
             : std::vector<int64_t>{task.length()};
  for (int64_t L : lengths) {
    TaskConfig c = task;
    c.seq_len = L;
    try {
      c.validate();
    } catch (const Error& e) {
      throw UsageError(option + " " + std::to_string(L) + ": " + e.what());
    }
    as_usage_error([&] { check_position_limit(model, L, option + " " + std::to_string(L)); });
  }
  return lengths;
}

void print_table(const std::vector<EvalResult>& results) {
  auto width = [](const std::string& name) { return int(std::max<size_t>(7, name.size())); };
  std::printf(" seq_len  token_acc  seq_acc     loss    rows");
  for (const auto& [name, a] : results[0].extra) std::printf("  %*s", width(name), name.c_str());
  std::printf("\n");
  for (const EvalResult& r : results) {
    std::printf("%8lld  %9.4f  %7.4f  %7.4f  %6lld", (long long)r.seq_len, r.score.token_acc, r.score.seq_acc,
                r.score.loss, (long long)r.score.rows);
    for (const auto& [name, a] : r.extra) std::printf("  %*.4f", width(name), a.value());
    std::printf("\n");
  }
}

Json json_report(const std::string& checkpoint, int64_t step, const ModelConfig& model, const TaskConfig& task,
                 const EvalSettings& s, const std::vector<EvalResult>& results) {
  Json j = {{"checkpoint", checkpoint}, {"step", step},         {"model", model.name()},
            {"task", config_json(task)}, {"batches", s.batches}, {"batch", s.batch_size},
            {"seed", s.seed},           {"results", Json::array()}};
  for (const EvalResult& r : results) {
    Json row = {{"seq_len", r.seq_len}, {"token_acc", r.score.token_acc}, {"seq_acc", r.score.seq_acc},
                {"loss", r.score.loss}, {"rows", r.score.rows},           {"scored", r.score.scored}};
    if (!r.extra.empty()) {
      row["extra"] = Json::object();
      for (const auto& [name, a] : r.extra)
        row["extra"][name] = {{"acc", a.value()}, {"correct", a.correct}, {"total", a.total}};
    }
    j["results"].push_back(row);
  }
  return j;
}

}  // namespace

void eval_options(CommandOptions& o) {
  o.named.add_options()
      ("checkpoint", po::value<std::string>()->value_name("FILE")->required(),
       "the checkpoint file (.h5), also the first positional argument")
      ("lengths", po::value<std::string>()->value_name("LIST"),
       "sequence lengths to evaluate at, comma-separated (length generalisation); default: the task's seq-len")
      ("batches", po::value<int64_t>()->value_name("N")->notifier(in_range<int64_t>("batches", 1, 100000)),
       "evaluation batches per length; default: the run's eval-batches")
      ("batch", po::value<int64_t>()->value_name("N")->notifier(in_range<int64_t>("batch", 1, 100000)),
       "rows per evaluation batch; default: the run's eval-batch")
      ("seed", po::value<int64_t>()->value_name("S")->notifier(check_seed),
       "base seed of the evaluation stream; default: the run's seed")
      ("gen-acc", po::value<bool>()->value_name("BOOL"),
       "tasks with a generated answer (copy): exact match of greedy decoding through the recurrent state; "
       "default 1 for them")
      ("dump", po::value<std::string>()->value_name("FILE"),
       "write the first evaluated batch (inputs, targets, mask, logits) to this HDF5 file")
      ("precision", po::value<std::string>()->value_name("P"),
       "the GEMMs' inputs, fp32 or bf16; default: the run's (a bf16 run evaluates in bf16)")
      ("json", po::bool_switch(), "print one JSON object instead of the table");
  o.named.add(task_options(false));  // no defaults: only what is given overrides the checkpoint
  o.positional.add("checkpoint", 1);
}

int run_eval(const po::variables_map& vm) {
  const std::string path = vm["checkpoint"].as<std::string>();
  LoadedModel loaded = load_model(path);
  const RunConfig& saved = loaded.config;
  set_gemm_precision(precision_of(vm.count("precision") ? vm["precision"].as<std::string>() : saved.run.precision));
  const TaskConfig task = overridden_task(saved.task, vm);
  const int64_t model_vocab = saved.model.vocab;
  if (task.vocab_size() != model_vocab)
    throw UsageError(task_words(task) + " does not match the model's vocab " + std::to_string(model_vocab) +
                     " of checkpoint " + path + " (allowed: a task with vocab " + std::to_string(model_vocab) + ")");
  const std::vector<int64_t> lengths = eval_lengths(vm, task, saved.model);

  EvalSettings s;
  // By default the run's own final evaluation on the test stream, the accuracy it reports.
  s.batches = vm.count("batches")                 ? vm["batches"].as<int64_t>()
              : saved.run.final_eval_batches > 0 ? saved.run.final_eval_batches
                                                  : saved.run.eval_batches;
  s.batch_size = vm.count("batch") ? vm["batch"].as<int64_t>() : saved.run.eval_batch;
  s.seed = uint64_t(vm.count("seed") ? vm["seed"].as<int64_t>() : saved.run.seed);
  const bool generative = task.behaviour().stop_token(task) >= 0;
  const bool gen_acc = vm.count("gen-acc") ? vm["gen-acc"].as<bool>() : generative;
  if (gen_acc && !generative)
    throw UsageError("--gen-acc 1 is for tasks with a generated answer, such as copy (the task is " + task.task + ")");

  const std::string dump_path = vm.count("dump") ? vm["dump"].as<std::string>() : "";
  bool dump_pending = !dump_path.empty();
  LanguageModel& model = *loaded.model;
  const BatchLogits logits_of = [&](const Batch& batch) {
    NoGradGuard no_grad;
    Tensor logits = model.forward(batch.inputs);
    if (dump_pending) {
      BatchDump d = batch_dump(batch);
      d.logits = logits;
      d.attrs = {{"checkpoint", path}, {"step", loaded.meta.step}, {"task", task.task},
                 {"seq_len", batch.inputs.shape()[1]}};
      write_batch_dump(dump_path, d);
      dump_pending = false;
    }
    return logits;
  };
  const GreedyDecoder decode = greedy_decoder(model);
  const std::vector<EvalResult> results = evaluate_lengths(task, lengths, logits_of, s, gen_acc ? &decode : nullptr);

  if (vm["json"].as<bool>()) {
    std::printf("%s\n", json_report(path, loaded.meta.step, saved.model, task, s, results).dump().c_str());
    return 0;
  }
  std::printf("checkpoint %s: step %lld, model %s, %s\n", path.c_str(), (long long)loaded.meta.step,
              saved.model.name().c_str(), task_words(task).c_str());
  std::printf("evaluation stream of seed %llu: %lld batch%s of %lld rows per length\n", (unsigned long long)s.seed,
              (long long)s.batches, s.batches == 1 ? "" : "es", (long long)s.batch_size);
  print_table(results);
  if (!dump_path.empty()) std::printf("dump: %s (the first batch at seq_len %lld)\n", dump_path.c_str(), (long long)lengths[0]);
  return 0;
}

}  // namespace tri::cli
