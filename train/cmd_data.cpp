// trilemma data show --task T [task options]: prints a few rows of a task's stream as the model
// sees them: the input tokens, and under each scored position its target in brackets.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "data/tasks.hpp"
#include "train/cli_options.hpp"

namespace tri::cli {

namespace {

void check_action(const std::string& a) {
  if (a != "show") throw UsageError("data: unknown action '" + a + "' (allowed: show)");
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
       "what to do, also the first positional argument: show");
  o.named.add(task_options());
  o.named.add_options()
      ("rows", po::value<int>()->value_name("N")->default_value(3)->notifier(in_range("rows", 1, 1000)),
       "rows to print")
      ("seed", po::value<int64_t>()->value_name("S")->default_value(0)->notifier(check_seed), "base seed of the streams")
      ("split", po::value<std::string>()->value_name("NAME")->default_value("train")
                    ->notifier([](const std::string& s) {
                      if (s != "train" && s != "eval")
                        throw UsageError("--split '" + s + "' unknown (allowed: train, eval)");
                    }),
       "stream: train or eval")
      ("batch", po::value<int64_t>()->value_name("I")->default_value(0), "batch index in the stream");
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
