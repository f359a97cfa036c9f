// trilemma generate CHECKPOINT: greedy decoding through the recurrent state (one token per
// step, models/decode.hpp). On a task with a generated answer (copy) it decodes rows of the
// evaluation stream and compares each with the expected answer; --prompt decodes from any
// token ids.
#include <cstdio>
#include <string>
#include <vector>

#include "models/decode.hpp"
#include "cli/arg_parsers.hpp"
#include "cli/cli.hpp"
#include "train/model_io.hpp"

namespace tri::cli {

using namespace tri::train;

namespace {

std::string tokens_text(const std::vector<int32_t>& tokens) {
  return int_list_text(std::vector<int64_t>(tokens.begin(), tokens.end()), ' ');
}

int generate_from_prompt(LoadedModel& loaded, const std::vector<int32_t>& prompt, int64_t max_new) {
  const TaskConfig& task = loaded.config.task;
  const int32_t stop = task.behaviour().stop_token(task);
  const std::vector<int32_t> out = greedy_decode(*loaded.model, prompt, max_new, stop);
  std::printf("prompt    %s\ngenerated %s\n", tokens_text(prompt).c_str(), tokens_text(out).c_str());
  if (stop >= 0) std::printf("(%zu token%s; decoding stops at %d)\n", out.size(), out.size() == 1 ? "" : "s", int(stop));
  return 0;
}

// Rows 0..rows-1 of evaluation batch 0 (the rows `trilemma eval --batches 1 --batch rows` scores):
// the prompt is the row up to its answer, decoded until the stop token or the answer's length.
int generate_rows(LoadedModel& loaded, int64_t rows, uint64_t seed) {
  const TaskConfig& task = loaded.config.task;
  const Batch batch = make_batch(task, stream_seed(seed, "eval"), 0, rows);
  const int64_t T = batch.inputs.shape()[1];
  const int32_t stop = task.behaviour().stop_token(task);
  std::printf("task %s: %s; evaluation stream of seed %llu\n", task.task.c_str(),
              task.behaviour().legend(task).c_str(), (unsigned long long)seed);
  int64_t exact = 0;
  for (int64_t b = 0; b < rows; ++b) {
    const AnswerSpan span = answer_span(batch, b);
    const int32_t* x = batch.inputs.data() + b * T;
    const std::vector<int32_t> prompt(x, x + span.start), expected(x + span.start, x + span.start + span.length);
    const std::vector<int32_t> got = greedy_decode(*loaded.model, prompt, span.length, stop);
    const bool right = got == expected;
    exact += right;
    std::printf("row %lld: %s\n  prompt    %s\n  expected  %s\n  generated %s\n", (long long)b,
                right ? "exact" : "wrong", tokens_text(prompt).c_str(), tokens_text(expected).c_str(),
                tokens_text(got).c_str());
  }
  std::printf("exact %lld/%lld\n", (long long)exact, (long long)rows);
  return 0;
}

}  // namespace

void generate_options(CommandOptions& o) {
  o.named.add_options()
      ("checkpoint", po::value<std::string>()->value_name("FILE")->required(),
       "the checkpoint file (.h5), also the first positional argument")
      ("rows", po::value<int64_t>()->value_name("N")->default_value(4)->notifier(in_range<int64_t>("rows", 1, 100000)),
       "tasks with a generated answer (copy): rows of the evaluation stream to decode")
      ("seed", po::value<int64_t>()->value_name("S")->notifier(check_seed),
       "base seed of the evaluation stream; default: the run's seed")
      ("prompt", po::value<std::string>()->value_name("IDS"),
       "token ids to decode from, space- or comma-separated (any task)")
      ("max-new", po::value<int64_t>()->value_name("N")->default_value(32)->notifier(in_range<int64_t>("max-new", 1, 100000)),
       "with --prompt: tokens to generate (copy stops early at EOS)");
  o.positional.add("checkpoint", 1);
}

int run_generate(const po::variables_map& vm) {
  const std::string path = vm["checkpoint"].as<std::string>();
  LoadedModel loaded = load_model(path);
  const RunConfig& c = loaded.config;
  const bool prompted = vm.count("prompt");
  const int64_t max_new = vm["max-new"].as<int64_t>();
  std::vector<int32_t> prompt;
  if (prompted) prompt = parse_prompt(loaded.config.model, vm["prompt"].as<std::string>(), max_new);
  else if (c.task.behaviour().stop_token(c.task) < 0)
    throw UsageError("generate needs --prompt for task " + c.task.task +
                     " (rows of the evaluation stream are decoded for tasks with a generated answer, such as copy)");
  const uint64_t seed = uint64_t(vm.count("seed") ? vm["seed"].as<int64_t>() : c.run.seed);
  std::printf("checkpoint %s: step %lld, model %s, task %s, vocab %lld\n", path.c_str(), (long long)loaded.meta.step,
              c.model.name().c_str(), c.task.task.c_str(), (long long)c.model.vocab);
  if (prompted) return generate_from_prompt(loaded, prompt, max_new);
  return generate_rows(loaded, vm["rows"].as<int64_t>(), seed);
}

}  // namespace tri::cli
