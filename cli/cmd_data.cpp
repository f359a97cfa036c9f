// trilemma data show --task T [task options]: prints a few rows of a task's stream as the model
// sees them: the input tokens, and under each scored position its target in brackets.
// trilemma data dump ... --batches N --rows B --out FILE.h5: batches of a stream exactly as the
// trainer draws them (step s trains on batch s of the train stream), for a reference outside
// trilemma to train on the same data (scripts/train_parity.py).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "data/batch_dump.hpp"
#include "data/tasks.hpp"
#include "framework/config/registry.hpp"
#include "cli/cli_options.hpp"
#include "train/run_config.hpp"

namespace tri::cli {

using namespace tri::train;

namespace {

void check_action(const std::string& a) {
  if (a != "show" && a != "dump") throw UsageError(unknown_name("data: action", a, {"show", "dump"}).what());
}

// Batches first..first+N-1 of B rows as /inputs, /targets and /mask, each [N, B, T]; attributes:
// task, split, seed, first_batch and the task's resolved options as `key = value` lines
// (task_config).
void dump_batches(const TaskConfig& c, const po::variables_map& vm, uint64_t stream, int64_t first, int64_t rows) {
  const std::string path = vm["out"].as<std::string>(), split = vm["split"].as<std::string>();
  const int64_t n = vm["batches"].as<int64_t>(), seed = vm["seed"].as<int64_t>();
  TextMap text;
  write_text(c, text);
  BatchDump d = stream_dump(c, stream, first, n, rows);
  d.attrs = {{"task", c.task}, {"split", split}, {"seed", seed}, {"first_batch", first},
             {"task_config", config_file_text(text)}};
  write_batch_dump(path, d);
  std::printf("dump: %s (task %s, %s stream of seed %lld: batches %lld..%lld of %lld x %lld tokens)\n", path.c_str(),
              c.task.c_str(), split.c_str(), (long long)seed, (long long)first, (long long)(first + n - 1),
              (long long)rows, (long long)c.length());
}

// Prints one row in blocks of `per_line` positions: position, inputs, [targets] where scored.
void print_row(const Batch& batch, int64_t b, int64_t width) {
  const int64_t T = batch.inputs.shape()[1], per_line = std::max<int64_t>(1, 96 / width);
  const int32_t* x = batch.inputs.data() + b * T;
  const int32_t* y = batch.targets.data() + b * T;
  const uint8_t* m = batch.mask.data() + b * T;
  for (int64_t t0 = 0; t0 < T; t0 += per_line) {
    const int64_t t1 = std::min(T, t0 + per_line);
    char pos[32];
    std::snprintf(pos, sizeof pos, "%6lld  in ", (long long)t0);
    std::string in = pos, tg = "        out";
    bool any = false;
    for (int64_t t = t0; t < t1; ++t) {
      char cell[32];
      std::snprintf(cell, sizeof cell, "%*d", int(width), int(x[t]));
      in += cell;
      if (m[t]) {
        char target[24];
        std::snprintf(target, sizeof target, "[%d]", int(y[t]));
        std::snprintf(cell, sizeof cell, "%*s", int(width), target);
      } else {
        std::snprintf(cell, sizeof cell, "%*s", int(width), "");
      }
      tg += cell;
      any |= m[t] != 0;
    }
    while (!tg.empty() && tg.back() == ' ') tg.pop_back();
    std::printf("%s\n", in.c_str());
    if (any) std::printf("%s\n", tg.c_str());
  }
}

}  // namespace

void data_options(CommandOptions& o) {
  o.named.add_options()
      ("action", po::value<std::string>()->value_name("ACTION")->required()->notifier(check_action),
       "what to do, also the first positional argument: show (print rows) or dump (write batches to HDF5)");
  o.named.add(task_options());
  o.named.add_options()
      ("rows", po::value<int>()->value_name("N")->default_value(3)->notifier(in_range("rows", 1, 1 << 20)),
       "rows to print (show); rows per batch, train's --batch (dump)")
      ("seed", po::value<int64_t>()->value_name("S")->default_value(0)->notifier(check_seed), "base seed of the streams")
      ("split", po::value<std::string>()->value_name("NAME")->default_value("train")
                    ->notifier([](const std::string& s) {
                      if (s != "train" && s != "valid" && s != "eval")
                        throw UsageError(unknown_name("--split", s, {"train", "valid", "eval"}).what());
                    }),
       "stream: train, valid (periodic evaluations) or eval (the held-out test stream)")
      ("batch", po::value<int64_t>()->value_name("I")->default_value(0),
       "batch index in the stream (dump: the first one written)")
      ("batches", po::value<int64_t>()->value_name("N")->default_value(1)->notifier(in_range<int64_t>("batches", 1, 1 << 20)),
       "dump: how many consecutive batches to write")
      ("out", po::value<std::string>()->value_name("FILE"), "dump: the HDF5 file to write");
  o.positional.add("action", 1);
}

int run_data(const po::variables_map& vm) {
  TaskConfig c = as_usage_error([&] { return TaskConfig::of(vm["task"].as<std::string>()); });
  read_given(vm, c);
  refuse_foreign(vm, c, task_options(), "task " + c.task);
  as_usage_error([&] {
    resolve_zeros(c);
    c.validate();
    return 0;
  });
  const int rows = vm["rows"].as<int>();
  const int64_t index = vm["batch"].as<int64_t>();
  if (index < 0) throw UsageError("--batch " + std::to_string(index) + " is negative (allowed: >= 0)");
  const uint64_t seed = stream_seed(uint64_t(vm["seed"].as<int64_t>()), vm["split"].as<std::string>());
  const bool dump = vm["action"].as<std::string>() == "dump";
  if (dump && !vm.count("out")) throw UsageError("data dump needs --out FILE.h5 (the file to write)");
  if (dump && !given(vm, "rows"))  // show's default of 3 rows is no training batch size
    throw UsageError("data dump needs --rows B (the rows per batch, train's --batch)");
  for (const char* key : {"out", "batches"})
    if (!dump && given(vm, key)) throw UsageError(std::string("--") + key + " is an option of data dump, not of data show");
  if (dump) {
    dump_batches(c, vm, seed, index, rows);
    return 0;
  }
  const Batch batch = make_batch(c, seed, uint64_t(index), rows);
  const int64_t width = int64_t(std::to_string(c.vocab_size() - 1).size()) + 3;
  std::printf("task %s, seq_len %lld, vocab %lld (%s)\n", c.task.c_str(), (long long)c.length(),
              (long long)c.vocab_size(), c.behaviour().legend(c).c_str());
  std::printf("each block: position of its first column; `in` the inputs, `out` [the target] at scored positions\n");
  for (int b = 0; b < rows; ++b) {
    int64_t scored = 0;
    for (int64_t t = 0; t < c.length(); ++t) scored += batch.mask[size_t(b * c.length() + t)];
    std::printf("\nrow %d: %lld scored", b, (long long)scored);
    if (!batch.group.empty())
      std::printf(", %s %lld", c.behaviour().group_name().c_str(), (long long)batch.group[size_t(b)]);
    std::printf("\n");
    print_row(batch, b, width);
  }
  return 0;
}

}  // namespace tri::cli
