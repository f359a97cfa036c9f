// trilemma eval CHECKPOINT: a trained model on its task's evaluation stream, at the trained
// length or at several (--lengths: length generalisation), as a table or one JSON object.
// Task options given on the command line override the checkpoint's task; --dump writes the
// first evaluated batch with its logits to HDF5 (scripts/interop_check.py replays it in PyTorch).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "framework/h5.hpp"
#include "train/atomic_file.hpp"
#include "train/eval_report.hpp"
#include "train/model_io.hpp"

namespace tri::cli {

namespace {

constexpr long kMaxLength = long(1) << 24;

po::options_description task_overrides() {
  po::options_description d("task options (default: the checkpoint's task; given ones override it)", 100);
  add_task_options(d, false);  // no defaults: only what is given overrides the checkpoint
  return d;
}

// The checkpoint's task with the given task options applied. The saved seq-len is the old
// task's resolved length, so it falls back to the task's default when the task changes or
// copy's --max-len changes, unless --seq-len is given too. vocab stays the model's unless given.
// `merged` receives the resulting options as text, seq-len and vocab resolved.
TaskConfig overridden_task(const ConfigMap& saved, const po::variables_map& vm, ConfigMap& merged) {
  const ConfigMap given = config_text(vm, task_overrides());
  merged = saved;
  for (const auto& [k, v] : given) merged[k] = v;
  if (!given.count("seq-len")) {
    const bool task_changed = given.count("task") && given.at("task") != saved.at("task");
    const bool copy_resized = merged["task"] == "copy" && given.count("max-len");
    if (task_changed || copy_resized) merged["seq-len"] = "0";
  }
  const TaskConfig task = task_config(merged);  // UsageError naming the bad option
  merged["seq-len"] = std::to_string(task.length());
  merged["vocab"] = std::to_string(task.vocab_size());
  return task;
}

std::string task_words(const TaskConfig& t) {
  return "task " + t.task + " (vocab " + std::to_string(t.vocab_size()) +
         (t.task == "copy" ? ", alphabet " + std::to_string(t.alphabet) : "") + ")";
}

// The lengths to evaluate, each checked against the task and the learned positions' table.
std::vector<int64_t> eval_lengths(const po::variables_map& vm, const TaskConfig& task, const ModelConfig& model) {
  const bool listed = vm.count("lengths");
  const std::string option = listed ? "--lengths" : "--seq-len";
  const std::vector<int64_t> lengths =
      listed ? parse_int_list("lengths", vm["lengths"].as<std::string>(), 1, kMaxLength, false)
             : std::vector<int64_t>{task.length()};
  for (int64_t L : lengths) {
    TaskConfig c = task;
    c.seq_len = L;
    try {
      c.validate();
    } catch (const Error& e) {
      throw UsageError(option + " " + std::to_string(L) + ": task " + e.what());
    }
    if (model.pos == "learned" && L > model.max_seq_len)
      throw UsageError(option + " " + std::to_string(L) + " exceeds the checkpoint's learned positions (max-seq-len " +
                       std::to_string(model.max_seq_len) + "; allowed: seq-len <= max-seq-len)");
  }
  return lengths;
}

struct DumpInfo {
  std::string path, checkpoint, task;
  int64_t step;
};

// /inputs, /targets (-100 where unscored), /mask [B, T] int32 and /logits [B, T, V] float32,
// written atomically: a failure leaves no file behind.
void write_dump(const DumpInfo& d, const Batch& batch, const Tensor& logits) {
  write_atomically(d.path, [&](const std::string& tmp) {
    H5File f(tmp, H5File::Mode::create);
    f.write_ints("/inputs", batch.inputs.shape, batch.inputs.v);
    f.write_ints("/targets", batch.targets.shape, batch.targets.v);
    f.write_ints("/mask", batch.inputs.shape, std::vector<int32_t>(batch.mask.begin(), batch.mask.end()));
    f.write("/logits", logits);
    f.set_attr("/", "checkpoint", d.checkpoint);
    f.set_attr("/", "step", d.step);
    f.set_attr("/", "task", d.task);
    f.set_attr("/", "seq_len", batch.inputs.shape[1]);
    f.flush();
  });
}

std::string fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

void print_table(const std::vector<LengthReport>& reports) {
  std::string head = " seq_len  token_acc  seq_acc     loss    rows";
  if (reports[0].has_gen_acc) head += "  gen_acc";
  for (const auto& [d, s] : reports[0].by_distance) {
    char cell[32];
    std::snprintf(cell, sizeof cell, "  %9s", ("acc@" + std::to_string(d)).c_str());
    head += cell;
  }
  std::printf("%s\n", head.c_str());
  for (const LengthReport& r : reports) {
    std::printf("%8lld  %9s  %7s  %7s  %6lld", (long long)r.seq_len, fixed(r.score.token_acc).c_str(),
                fixed(r.score.seq_acc).c_str(), fixed(r.score.loss).c_str(), (long long)r.score.rows);
    if (r.has_gen_acc) std::printf("  %7s", fixed(r.gen_acc()).c_str());
    for (const auto& [d, s] : r.by_distance) std::printf("  %9s", fixed(s.accuracy()).c_str());
    std::printf("\n");
  }
}

// A config value as JSON: integers as they are, other finite numbers in their shortest exact
// form, anything else (distance lists, names) as a string.
std::string json_value(const std::string& text) {
  if (text.empty()) return "\"\"";
  const size_t first_digit = text[0] == '-' ? 1 : 0;
  const bool integer = text.size() > first_digit &&
                       text.find_first_not_of("0123456789", first_digit) == std::string::npos &&
                       (text[first_digit] != '0' || text.size() == first_digit + 1);
  if (integer) return text;
  char* rest = nullptr;
  const double v = std::strtod(text.c_str(), &rest);
  if (*rest == '\0' && std::isfinite(v)) return exact_number(v);
  return json_quote(text);
}

std::string json_report(const std::string& checkpoint, int64_t step, const ModelConfig& model,
                        const ConfigMap& task_config_text, const EvalSettings& s,
                        const std::vector<LengthReport>& reports) {
  std::string j = "{\"checkpoint\": " + json_quote(checkpoint) + ", \"step\": " + std::to_string(step) +
                  ", \"model\": " + json_quote(model.family) + ", \"task\": {";
  bool first = true;
  const po::options_description task_options = task_overrides();
  for (const auto& opt : task_options.options()) {
    const std::string& key = opt->long_name();
    auto it = task_config_text.find(key);
    if (it == task_config_text.end()) continue;
    j += std::string(first ? "" : ", ") + json_quote(key) + ": " + json_value(it->second);
    first = false;
  }
  j += "}, \"batches\": " + std::to_string(s.batches) + ", \"batch\": " + std::to_string(s.batch_size) +
       ", \"seed\": " + std::to_string(s.seed) + ", \"results\": [";
  for (size_t i = 0; i < reports.size(); ++i) {
    const LengthReport& r = reports[i];
    j += std::string(i ? ", " : "") + "{\"seq_len\": " + std::to_string(r.seq_len) +
         ", \"token_acc\": " + json_number(r.score.token_acc) + ", \"seq_acc\": " + json_number(r.score.seq_acc) +
         ", \"loss\": " + json_number(r.score.loss) + ", \"rows\": " + std::to_string(r.score.rows) +
         ", \"scored\": " + std::to_string(r.score.scored);
    if (r.has_gen_acc)
      j += ", \"gen_acc\": " + json_number(r.gen_acc()) + ", \"gen_exact\": " + std::to_string(r.gen_exact);
    if (!r.by_distance.empty()) {
      j += ", \"accuracy_by_distance\": {";
      bool first_d = true;
      for (const auto& [d, t] : r.by_distance) {
        j += std::string(first_d ? "" : ", ") + json_quote(std::to_string(d)) + ": " + json_number(t.accuracy());
        first_d = false;
      }
      j += "}";
    }
    j += "}";
  }
  return j + "]}";
}

}  // namespace

void eval_options(CommandOptions& o) {
  o.named.add_options()
      ("checkpoint", po::value<std::string>()->value_name("FILE")->required(),
       "the checkpoint file (.h5), also the first positional argument")
      ("lengths", po::value<std::string>()->value_name("LIST"),
       "sequence lengths to evaluate at, comma-separated (length generalisation); default: the task's seq-len")
      ("batches", po::value<long>()->value_name("N")->notifier(in_range("batches", 1L, 100000L)),
       "evaluation batches per length; default: the run's eval-batches")
      ("batch", po::value<long>()->value_name("N")->notifier(in_range("batch", 1L, 100000L)),
       "rows per evaluation batch; default: the run's eval-batch")
      ("seed", po::value<long>()->value_name("S")->notifier(check_seed),
       "base seed of the evaluation stream; default: the run's seed")
      ("gen-acc", po::value<bool>()->value_name("BOOL"),
       "copy: exact-match accuracy of greedy decoding through the recurrent state; default 1 for copy")
      ("dump", po::value<std::string>()->value_name("FILE"),
       "write the first evaluated batch (inputs, targets, mask, logits) to this HDF5 file")
      ("json", po::bool_switch(), "print one JSON object instead of the table");
  o.named.add(task_overrides());
  o.positional.add("checkpoint", 1);
}

int run_eval(const po::variables_map& vm) {
  const std::string path = vm["checkpoint"].as<std::string>();
  LoadedModel loaded = load_model(path);
  ConfigMap task_text;
  const TaskConfig task = overridden_task(loaded.config, vm, task_text);
  const int64_t model_vocab = loaded.model_config.vocab;
  if (task.vocab_size() != model_vocab)
    throw UsageError(task_words(task) + " does not match the model's vocab " + std::to_string(model_vocab) +
                     " of checkpoint " + path + " (allowed: a task with vocab " + std::to_string(model_vocab) + ")");
  const std::vector<int64_t> lengths = eval_lengths(vm, task, loaded.model_config);

  EvalSettings s;
  s.batches = vm.count("batches") ? vm["batches"].as<long>() : saved_setting(loaded.config, "eval-batches", path);
  s.batch_size = vm.count("batch") ? vm["batch"].as<long>() : saved_setting(loaded.config, "eval-batch", path);
  s.seed = uint64_t(vm.count("seed") ? vm["seed"].as<long>() : saved_setting(loaded.config, "seed", path));
  s.gen_acc = vm.count("gen-acc") ? vm["gen-acc"].as<bool>() : task.task == "copy";
  if (s.gen_acc && task.task != "copy")
    throw UsageError("--gen-acc 1 is for task copy only (the task is " + task.task + ")");
  if (s.batches < 1 || s.batch_size < 1)
    throw Error("checkpoint " + path + ": config eval-batches " + std::to_string(s.batches) + " and eval-batch " +
                std::to_string(s.batch_size) + " must be >= 1");

  const DumpInfo dump{vm.count("dump") ? vm["dump"].as<std::string>() : "", path, task.task, loaded.meta.step};
  std::vector<LengthReport> reports;
  for (int64_t L : lengths) {
    TaskConfig c = task;
    c.seq_len = L;
    FirstBatchFn first = nullptr;
    if (!dump.path.empty() && reports.empty())
      first = [&](const Batch& batch, const Tensor& logits) { write_dump(dump, batch, logits); };
    reports.push_back(evaluate_length(*loaded.model, c, s, first));
  }

  if (vm["json"].as<bool>()) {
    std::printf("%s\n", json_report(path, loaded.meta.step, loaded.model_config, task_text, s, reports).c_str());
    return 0;
  }
  std::printf("checkpoint %s: step %lld, model %s, %s\n", path.c_str(), (long long)loaded.meta.step,
              loaded.model_config.family.c_str(), task_words(task).c_str());
  std::printf("evaluation stream of seed %llu: %lld batch%s of %lld rows per length\n", (unsigned long long)s.seed,
              (long long)s.batches, s.batches == 1 ? "" : "es", (long long)s.batch_size);
  print_table(reports);
  if (!dump.path.empty()) std::printf("dump: %s (the first batch at seq_len %lld)\n", dump.path.c_str(), (long long)lengths[0]);
  return 0;
}

}  // namespace tri::cli
