// trilemma data show --task T [task options]: prints a few rows of a task's stream as the model
// sees them: the input tokens, and under each scored position its target in brackets.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "data/tasks.hpp"
#include "train/cli.hpp"

namespace tri::cli {

namespace {

std::vector<int64_t> parse_distances(const std::string& list) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t end = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, end - pos);
    char* rest = nullptr;
    const long long v = std::strtoll(item.c_str(), &rest, 10);
    if (item.empty() || *rest != '\0' || v < 1)
      throw UsageError("--distance: '" + item + "' in '" + list +
                       "' is not a distance (allowed: positive integers, comma-separated)");
    out.push_back(v);
    pos = end + 1;
  }
  return out;
}

void check_action(const std::string& a) {
  if (a != "show") throw UsageError("data: unknown action '" + a + "' (allowed: show)");
}

void check_task(const std::string& t) {
  for (const std::string& n : task_names())
    if (n == t) return;
  std::string names;
  for (const std::string& n : task_names()) names += (names.empty() ? "" : ", ") + n;
  throw UsageError("--task '" + t + "' unknown (allowed: " + names + ")");
}

// The task options as a TaskConfig; the option named in a config error is the message's subject.
TaskConfig task_config(const po::variables_map& vm) {
  TaskConfig c;
  c.task = vm["task"].as<std::string>();
  c.seq_len = vm["seq-len"].as<long>();
  c.vocab = vm["vocab"].as<long>();
  c.alphabet = vm["alphabet"].as<long>();
  c.min_len = vm["min-len"].as<long>();
  c.max_len = vm["max-len"].as<long>();
  c.num_tokens = vm["num-tokens"].as<long>();
  c.num_kv_pairs = vm["num-kv-pairs"].as<long>();
  c.power_a = vm["power-a"].as<double>();
  c.random_fillers = vm["random-fillers"].as<bool>();
  c.distances = parse_distances(vm["distance"].as<std::string>());
  try {
    c.validate();
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  return c;
}

std::string token_names(const TaskConfig& c) {
  const int64_t A = c.alphabet, V = c.vocab_size();
  auto n = [](int64_t v) { return std::to_string(v); };
  if (c.task == "copy")
    return "symbols 0.." + n(A - 1) + ", BOS " + n(A) + ", SEP " + n(A + 1) + ", EOS " + n(A + 2) + ", PAD " + n(A + 3);
  if (c.task == "selective-copy") return "noise 0, data 1.." + n(V - 2) + ", marker " + n(V - 1);
  if (c.task == "mqar") return "keys 1.." + n(V / 2 - 1) + ", values " + n(V / 2) + ".." + n(V - 1) + ", filler 0";
  if (c.task == "induction") return "trigger 0, content 1.." + n(V - 1);
  return "fillers 1.." + n(V / 4 - 1) + ", keys " + n(V / 4) + ".." + n(V / 2 - 1) + ", values " + n(V / 2) + ".." + n(V - 1);
}

// Prints one row in blocks of `per_line` positions: position, inputs, [targets] where scored.
void print_row(const Batch& batch, int64_t b, int64_t width) {
  const int64_t T = batch.inputs.shape[1], per_line = std::max<int64_t>(1, 96 / width);
  const int32_t* x = batch.inputs.v.data() + b * T;
  const int32_t* y = batch.targets.v.data() + b * T;
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
       "what to do, also the first positional argument: show")
      ("task", po::value<std::string>()->value_name("NAME")->required()->notifier(check_task),
       "copy, selective-copy, mqar, induction or needle")
      ("seq-len", po::value<long>()->value_name("N")->default_value(0),
       "row length; 0 = the task's default (copy 2*max-len+3, mqar 128, others 256)")
      ("vocab", po::value<long>()->value_name("N")->default_value(0),
       "vocabulary (selective-copy, mqar, induction, needle); 0 = default (16; mqar and needle 8192)")
      ("alphabet", po::value<long>()->value_name("N")->default_value(26), "copy: alphabet size")
      ("min-len", po::value<long>()->value_name("N")->default_value(5), "copy: shortest string")
      ("max-len", po::value<long>()->value_name("N")->default_value(20), "copy: longest string")
      ("num-tokens", po::value<long>()->value_name("M")->default_value(16),
       "selective-copy: data tokens to copy")
      ("num-kv-pairs", po::value<long>()->value_name("K")->default_value(8), "mqar: key-value pairs")
      ("power-a", po::value<double>()->value_name("A")->default_value(0.01, "0.01"),
       "mqar: query gaps drawn with p(i) ~ i^(a-1)")
      ("random-fillers", po::value<bool>()->value_name("BOOL")->default_value(false, "false"),
       "mqar: fill the query region with random tokens instead of 0")
      ("distance", po::value<std::string>()->value_name("LIST")->default_value("4,16,64,128,250"),
       "needle: key-query distances, comma-separated; row i uses the (i mod count)-th")
      ("rows", po::value<int>()->value_name("N")->default_value(3)->notifier(in_range("rows", 1, 1000)),
       "rows to print")
      ("seed", po::value<long>()->value_name("S")->default_value(0), "base seed of the streams")
      ("split", po::value<std::string>()->value_name("NAME")->default_value("train")
                    ->notifier([](const std::string& s) {
                      if (s != "train" && s != "eval")
                        throw UsageError("--split '" + s + "' unknown (allowed: train, eval)");
                    }),
       "stream: train or eval")
      ("batch", po::value<long>()->value_name("I")->default_value(0), "batch index in the stream");
  o.positional.add("action", 1);
}

int run_data(const po::variables_map& vm) {
  const TaskConfig c = task_config(vm);
  const int rows = vm["rows"].as<int>();
  const long index = vm["batch"].as<long>();
  if (index < 0) throw UsageError("--batch " + std::to_string(index) + " is negative (allowed: >= 0)");
  const uint64_t seed = stream_seed(uint64_t(vm["seed"].as<long>()), vm["split"].as<std::string>());
  const Batch batch = make_batch(c, seed, uint64_t(index), rows);
  const int64_t width = int64_t(std::to_string(c.vocab_size() - 1).size()) + 3;
  std::printf("task %s, seq_len %lld, vocab %lld (%s)\n", c.task.c_str(), (long long)c.length(),
              (long long)c.vocab_size(), token_names(c).c_str());
  std::printf("each block: position of its first column; `in` the inputs, `out` [the target] at scored positions\n");
  for (int b = 0; b < rows; ++b) {
    int64_t scored = 0;
    for (int64_t t = 0; t < c.length(); ++t) scored += batch.mask[size_t(b * c.length() + t)];
    std::printf("\nrow %d: %lld scored", b, (long long)scored);
    if (!batch.distance.empty()) std::printf(", distance %lld", (long long)batch.distance[size_t(b)]);
    std::printf("\n");
    print_row(batch, b, width);
  }
  return 0;
}

}  // namespace tri::cli
