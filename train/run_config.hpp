// A run's configuration as text: every option under its CLI name ("d-model" -> "64"), the form
// that is printed, saved as the run's config.ini (readable again by --config) and stored as the
// checkpoint's /config attributes. Typed views (ModelConfig, TaskConfig, TrainConfig) are parsed
// from that one map, so train, resume, eval and generate rebuild a model the same way.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/tasks.hpp"
#include "models/config.hpp"
#include "train/cli.hpp"

namespace tri::cli {

using ConfigMap = std::map<std::string, std::string>;

// Option groups. add_task_options(d, false) declares the task options without defaults, so a
// command can tell "given" from "not given" (eval overrides a checkpoint's task only where asked).
void add_model_options(po::options_description& d);
void add_task_options(po::options_description& d, bool with_defaults = true);
void add_training_options(po::options_description& d);

// Every option of `d` that has a value in `vm`, as text: integers in decimal, numbers in the
// shortest form that reads back to the same double, booleans 1 / 0.
ConfigMap config_text(const po::variables_map& vm, const po::options_description& d);
// The options of `d` given on the command line or in the config file (not defaulted).
std::map<std::string, bool> given_options(const po::variables_map& vm, const po::options_description& d);

// Integers in lo..hi, comma-separated ("--lengths 64,128") or, with spaces_too, separated by
// spaces or commas ("--prompt '3 1 4'"). A bad, out-of-range or empty item, or no item at all,
// is a UsageError naming the option and the item.
std::vector<int64_t> parse_int_list(const std::string& option, const std::string& text, int64_t lo,
                                    int64_t hi, bool spaces_too);

// One integer option of a config, in lo..hi; UsageError naming --key otherwise (or when missing).
int64_t config_int(const ConfigMap& c, const std::string& key, int64_t lo, int64_t hi);

// Typed views. Each throws UsageError naming the option (--key), the bad value and what is
// allowed; a missing key is an error too.
TaskConfig task_config(const ConfigMap& c);                            // validated
ModelConfig model_config(const ConfigMap& c, const TaskConfig& task);  // vocab from the task; validated

struct TrainConfig {
  std::string optimizer;  // adamw | sgd
  double lr, min_lr, beta1, beta2, eps, weight_decay, momentum, clip;
  std::string schedule;   // cosine | constant
  int64_t warmup, batch, steps;
  int64_t eval_every, eval_batches, eval_batch;  // eval_batch: rows per evaluation batch
  int64_t checkpoint_every, keep, log_every;
  double early_stop;      // stop once evaluation token accuracy >= this; 0 = never
  uint64_t seed;
  std::string progress;   // auto | bar | lines | none
};
TrainConfig train_config(const ConfigMap& c);

// Replaces "0 = default" values by what they resolve to: seq-len and vocab (the task's),
// max-seq-len (the task length), dt-rank (ceil(d_model/16)), eval-batch (batch),
// checkpoint-every (eval-every), threads (the physical cores).
void resolve(ConfigMap& c);

// `key = value` lines, sorted, as --config reads them.
std::string config_file_text(const ConfigMap& c);

// Shortest decimal text that reads back to exactly v.
std::string exact_number(double v);

}  // namespace tri::cli
