// The trilemma command-line tool: `trilemma <command> [options]`.
// Commands are rows of one table (cli_main.cpp); each lives in its own cli/cmd_<name>.cpp and
// provides an options builder and a run function. run_cli adds the common options (--config,
// --threads, --gemm, --help), parses the command line and the config file, applies the runtime
// settings (unless the command does, as train does with a resumed run's own) and calls run.
#pragma once
#include <boost/program_options.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "framework/config/options.hpp"
#include "framework/system/stop_signals.hpp"
#include "framework/core/tensor.hpp"

namespace tri::train {
struct RunConfig;
}

namespace tri::cli {

namespace po = boost::program_options;

// A command's options: named ones (also read from --config) and positional arguments, each
// mapped onto a named option.
struct CommandOptions {
  po::options_description named{100};
  po::positional_options_description positional;
};

struct Command {
  const char* name;
  std::string summary;                    // one line, for `trilemma help`
  void (*add_options)(CommandOptions&);
  int (*run)(const po::variables_map&);   // returns the exit code
  bool applies_runtime = false;           // applies --threads/--gemm itself (train)
  // What SIGINT and SIGTERM do while it runs (framework/system/stop_signals.hpp): most commands end
  // at once; train finishes its step and checkpoints; sweep forwards them to its runs.
  stop_signals::Policy on_signal = stop_signals::Policy::end_now;
};


// Runs `trilemma args...` in this process: the exit code, with every error as one line
// "trilemma: ..." on stderr (0 success, 1 a runtime error, 2 a bad command line).
int run_cli(const std::vector<std::string>& args);

// The options of `trilemma <command> args...` as run_cli parses them: the command line, then
// --config's file (the command line wins), each value checked by its notifier. A UsageError
// for anything malformed; nothing is run and the runtime settings are not applied.
po::variables_map parse_command(const std::string& command, const std::vector<std::string>& args);

// A notifier for po::value<T>()->notifier(...): rejects values outside [lo, hi] while the
// command line is parsed, before the command starts.
template <class T>
auto in_range(const std::string& option, T lo, T hi) {
  return [=](const T& v) {
    if (!(v >= lo && v <= hi))
      throw UsageError("--" + option + " " + number_text(v) + " is out of range (allowed: " +
                       number_text(lo) + ".." + number_text(hi) + ")");
  };
}

// --seed's notifier where a command takes a seed of its own: any non-negative integer.
void check_seed(int64_t seed);

// One pair per command, defined in cli/cmd_<name>.cpp.
void info_options(CommandOptions& o);
int run_info(const po::variables_map& vm);
void bench_options(CommandOptions& o);
int run_bench(const po::variables_map& vm);
void inspect_options(CommandOptions& o);
int run_inspect(const po::variables_map& vm);
void data_options(CommandOptions& o);
int run_data(const po::variables_map& vm);
void train_options(CommandOptions& o);
// A new run's typed config from train's options: resolved and validated, no file touched.
train::RunConfig new_run_config(const po::variables_map& vm);
int run_train(const po::variables_map& vm);
void sweep_options(CommandOptions& o);
int run_sweep(const po::variables_map& vm);
void eval_options(CommandOptions& o);
int run_eval(const po::variables_map& vm);
void generate_options(CommandOptions& o);
int run_generate(const po::variables_map& vm);
void attn_map_options(CommandOptions& o);
int run_attn_map(const po::variables_map& vm);
void report_options(CommandOptions& o);
int run_report(const po::variables_map& vm);

}  // namespace tri::cli
