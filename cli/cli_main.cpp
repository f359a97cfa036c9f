// trilemma <command> [options]: the command table, the common options and the dispatcher.
// Exit codes: 0 success, 1 a runtime error, 2 a bad command line (unknown command or option,
// malformed or out-of-range value). Every error is one line on stderr.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "bench/bench.hpp"
#include "framework/system/distributed.hpp"
#include "framework/runtime/runtime.hpp"
#include "cli/cli.hpp"
#include "cli/cli_options.hpp"

namespace tri::cli {

using namespace tri::train;
namespace {

// Adding a command: write cli/cmd_<name>.cpp, declare its pair in cli.hpp, add one row here.
const Command kCommands[] = {
    {"train", "train a model on a task into a run folder (checkpoints, metrics, summary); --resume DIR",
     train_options, run_train, true, stop_signals::Policy::finish_then_end_now},
    {"sweep", "run every run of a grid file into one folder (skips finished runs, resumes interrupted ones); --jobs, --shard",
     sweep_options, run_sweep, false, stop_signals::Policy::requests_only},
    {"eval", "evaluate a checkpoint on its task, at one or several lengths (--lengths); --json, --dump",
     eval_options, run_eval},
    {"generate", "greedy decoding through the recurrent state: rows of the eval stream, or --prompt",
     generate_options, run_generate},
    {"attn-map", "per-head attention heat maps of an attention checkpoint on one row (gnuplot PNG); --data",
     attn_map_options, run_attn_map},
    {"report", "a sweep folder's tables (mean and std over seeds, best lr) and plots: DIR/report.md, DIR/plots/",
     report_options, run_report},
    {"inspect", "a checkpoint's step, config and parameter table (name, shape, count, norm)",
     inspect_options, run_inspect},
    {"info", "print the runtime: version, GEMM backend, BLAS kernel, threads, CPU", info_options, run_info},
    {"bench", "run a benchmark (" + joined(bench::benchmark_names()) + ")", bench_options, run_bench},
    {"data", "show rows of a synthetic task, or dump its batches to HDF5 (show, dump)", data_options, run_data},
};

std::string command_names() {
  std::string s;
  for (const Command& c : kCommands) s += std::string(c.name) + ", ";
  return s + "help";
}

const Command* find_command(const std::string& name) {
  for (const Command& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

void print_commands(FILE* out) {
  std::fprintf(out, "usage: trilemma <command> [options]\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary.c_str());
  std::fprintf(out, "  %-10s %s\n", "help", "list the commands, or `help <command>` for its options");
  std::fprintf(out,
               "\n`trilemma <command> --help` lists a command's options with their defaults.\n"
               "Every command takes --config FILE (key = value lines; the command line wins),\n"
               "--threads N and --gemm %s.\n", gemm_backend_names("|").c_str());
}

po::options_description command_line_only_options() {
  po::options_description d(100);
  d.add_options()
      ("config", po::value<std::string>()->value_name("FILE"),
       "read options from an INI-style file of `key = value` lines; the command line overrides it")
      ("help", "list this command's options and exit");
  return d;
}

// Positional words the command does not take land here, so the error can name them.
const char* const kExtraArgs = "extra-arguments";

std::string usage_line(const Command& cmd, const CommandOptions& co) {
  std::string s = std::string("usage: trilemma ") + cmd.name + " [options]";
  const unsigned n = co.positional.max_total_count();
  for (unsigned i = 0; i < n; ++i) {
    const std::string& name = co.positional.name_for_position(i);
    if (name == kExtraArgs) break;
    if (n == std::numeric_limits<unsigned>::max() && name == co.positional.name_for_position(n - 1)) {
      s += " <" + name + ">...";  // the trailing, repeated argument
      break;
    }
    s += " <" + name + ">";
  }
  return s;
}

void print_command_help(const Command& cmd) {
  CommandOptions co;
  cmd.add_options(co);
  std::printf("%s\n%s\n\n", usage_line(cmd, co).c_str(), cmd.summary.c_str());
  if (!co.named.options().empty()) std::cout << cmd.name << " options:\n" << co.named << "\n";
  std::cout << runtime_options() << command_line_only_options();
}

const po::option_description* find_option(const po::options_description& d,
                                          const std::string& option) {
  return d.find_nothrow(option.rfind("--", 0) == 0 ? option.substr(2) : option, false);
}

std::string description_of(const po::options_description& d, const std::string& option) {
  const po::option_description* od = find_option(d, option);
  return od ? od->description() : "";
}

// "an integer", "a number", ...: what a typed option accepts, for error messages.
std::string expected_value(const po::options_description& d, const std::string& option) {
  const po::option_description* od = find_option(d, option);
  if (!od) return "";
  const po::value_semantic* s = od->semantic().get();
  if (dynamic_cast<const po::typed_value<int>*>(s) || dynamic_cast<const po::typed_value<int64_t>*>(s))
    return " (expected an integer)";
  if (dynamic_cast<const po::typed_value<double>*>(s) || dynamic_cast<const po::typed_value<float>*>(s))
    return " (expected a number)";
  return "";
}

// Rewords Boost's parse errors as one line that names the bad token and what is allowed.
[[noreturn]] void rethrow_parse_error(const po::error& e, const std::string& where,
                                      const po::options_description& d, const Command& cmd) {
  if (auto* u = dynamic_cast<const po::unknown_option*>(&e))
    throw UsageError(where + "unknown option '" + u->get_option_name() + "' (allowed: see `trilemma " +
                     cmd.name + " --help`)");
  if (auto* r = dynamic_cast<const po::required_option*>(&e))
    throw UsageError(where + "missing " + r->get_option_name() + " (" + description_of(d, r->get_option_name()) + ")");
  std::string msg = e.what();
  if (dynamic_cast<const po::invalid_bool_value*>(&e))
    ;  // Boost's message already lists the accepted words
  else if (auto* v = dynamic_cast<const po::validation_error*>(&e))
    msg += expected_value(d, v->get_option_name());
  throw UsageError(where + msg);
}

// Boost's error messages replace each "%option%"-style placeholder by its text until none is
// left, so an argument or a config line holding one would make what() loop forever (found by
// fuzzing the config file): refused before Boost sees it.
void refuse_boost_placeholders(const std::string& text, const std::string& where) {
  for (const char* p : {"%canonical_option%", "%prefix%", "%option%", "%original_token%", "%value%"})
    if (text.find(p) != std::string::npos)
      throw UsageError(where + "'" + text + "' contains '" + p + "' (allowed: text without it)");
}

// --threads and --gemm, parsed into their struct and applied.
void apply_runtime_options(const po::variables_map& vm) {
  RuntimeConfig runtime;
  read_given(vm, runtime);
  as_usage_error([&] {
    resolve_zeros(runtime);
    check_ranges(runtime);
    return 0;
  });
  runtime.apply();
}

po::variables_map parse_options(const Command& cmd, const std::vector<std::string>& args) {
  CommandOptions co;
  cmd.add_options(co);
  if (co.positional.max_total_count() != std::numeric_limits<unsigned>::max())
    co.positional.add(kExtraArgs, -1);

  po::options_description file_opts(100), cli_opts(100);
  file_opts.add(co.named).add(runtime_options());
  cli_opts.add(file_opts).add(command_line_only_options());
  cli_opts.add_options()(kExtraArgs, po::value<std::vector<std::string>>());

  // Long options only ("--name value" or "--name=value"): "-1" is then a value, not an option,
  // and no abbreviation can become ambiguous when a command gains an option.
  const int style = po::command_line_style::allow_long | po::command_line_style::long_allow_adjacent |
                    po::command_line_style::long_allow_next;
  for (const std::string& a : args) refuse_boost_placeholders(a, "");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(cli_opts).positional(co.positional)
                  .style(style).run(), vm);
  } catch (const po::error& e) {
    rethrow_parse_error(e, "", cli_opts, cmd);
  }
  // Values stored first win: the command line overrides the config file.
  if (vm.count("config")) {
    const std::string path = vm["config"].as<std::string>();
    std::ifstream f(path);
    if (!f || std::filesystem::is_directory(path))
      throw UsageError("--config '" + path + "' cannot be read (" +
                       (f ? "it is a directory" : std::strerror(errno)) + ")");
    std::stringstream text;
    text << f.rdbuf();
    for (std::string line; std::getline(text, line);)
      refuse_boost_placeholders(line, "config file '" + path + "': ");
    text.clear();
    text.seekg(0);
    try {
      po::store(po::parse_config_file(text, file_opts), vm);
    } catch (const po::error& e) {
      rethrow_parse_error(e, "config file '" + path + "': ", file_opts, cmd);
    }
  }
  try {
    po::notify(vm);
  } catch (const po::error& e) {
    rethrow_parse_error(e, "", cli_opts, cmd);
  }
  if (vm.count(kExtraArgs)) {
    std::string first = vm[kExtraArgs].as<std::vector<std::string>>()[0];
    throw UsageError("unexpected argument '" + first + "' (" + usage_line(cmd, co) + ")");
  }
  return vm;
}

int run_command(const Command& cmd, const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") {
      print_command_help(cmd);
      return 0;
    }
  const po::variables_map vm = parse_options(cmd, args);
  if (!cmd.applies_runtime) apply_runtime_options(vm);
  return cmd.run(vm);
}

int dispatch(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" ||
      (args[0] == "help" && (args.size() == 1 || args[1] == "help"))) {
    print_commands(stdout);
    return 0;
  }
  const bool help = args[0] == "help";
  const std::string& name = help ? args[1] : args[0];
  const Command* cmd = find_command(name);
  if (!cmd) {
    if (name.rfind("-", 0) == 0)
      throw UsageError("expected a command before '" + name + "' (commands: " + command_names() + ")");
    throw UsageError("unknown command '" + name + "' (commands: " + command_names() + ")");
  }
  if (help) {
    print_command_help(*cmd);
    return 0;
  }
  // Under mpirun every rank would run the command on its own (a sweep would start P sweeps).
  if (const int ranks = dist::launched_ranks(); ranks > 1 && name != "train" && name != "info")
    throw UsageError("trilemma " + name + " runs as one process, and this one was started as one of " +
                     std::to_string(ranks) + " MPI ranks (only train runs across ranks; start " + name + " without mpirun)");
  const stop_signals::PolicyScope on_signal(cmd->on_signal);
  const int code = run_command(*cmd, {args.begin() + 1, args.end()});
  // A stop the command took as a request still ends the process as that signal would.
  const int sig = stop_signals::requested_signal();
  return code == 0 && sig != 0 ? 128 + sig : code;
}

int fail(const char* what, int code) {
  std::string line = what;
  for (char& c : line)
    if (c == '\n') c = ' ';
  std::fflush(stdout);
  if (dist::size() == 1) {
    std::fprintf(stderr, "trilemma: %s\n", line.c_str());
    return code;
  }
  // One rank of an MPI job: the others may wait for it in a collective, so the job ends here.
  std::fprintf(stderr, "trilemma (rank %d of %d): %s\n", dist::rank(), dist::size(), line.c_str());
  dist::abort(code);
}

}  // namespace

int run_cli(const std::vector<std::string>& args) {
  try {
    return dispatch(args);
  } catch (const UsageError& e) {
    return fail(e.what(), 2);
  } catch (const po::error& e) {
    return fail(e.what(), 2);
  } catch (const std::exception& e) {
    return fail(e.what(), 1);
  } catch (...) {
    return fail("unknown error", 1);
  }
}

po::variables_map parse_command(const std::string& command, const std::vector<std::string>& args) {
  const Command* cmd = find_command(command);
  if (!cmd) throw UsageError("unknown command '" + command + "' (commands: " + command_names() + ")");
  return parse_options(*cmd, args);
}

void check_seed(int64_t seed) {
  if (seed < 0) throw UsageError("--seed " + std::to_string(seed) + " is negative (allowed: >= 0)");
}

}  // namespace tri::cli
