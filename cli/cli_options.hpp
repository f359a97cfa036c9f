// Typed fields (framework/config/options.hpp) on the command line: declared as Boost options with
// their defaults and help, and read back from the parsed variables_map into the structs, so a
// value goes from the command line (or a --config file) into its field without passing through
// text. One command line serves every family and task: their options are declared together,
// each once, with the families or tasks that take it named in its help.
#pragma once
#include <set>
#include <string>

#include "cli/cli.hpp"
#include "train/run_config.hpp"

namespace tri::cli {

// Option groups. task_options(false) declares the task options without defaults, so a command
// can tell "given" from "not given" (eval overrides a checkpoint's task only where asked).
po::options_description model_options();
po::options_description task_options(bool with_defaults = true);
po::options_description training_options();  // optimizer, schedule, run settings
po::options_description runtime_options();   // --threads, --gemm: every command has them

// True when `key` was given on the command line or in a config file (not defaulted).
bool given(const po::variables_map& vm, const std::string& key);

// Sets every field of `o` that was given; with `only`, just the given ones among those keys.
void read_given(const po::variables_map& vm, Options& o);
void read_given(const po::variables_map& vm, Options& o, const std::set<std::string>& only);

// A given option that `o` does not have (another family's or task's) is refused unless it holds
// that option's default (a config.ini lists every option): UsageError naming the option and
// what takes it. `groups` are the declarations to look in; `what` names o ("model attention").
void refuse_foreign(const po::variables_map& vm, const Options& o, const po::options_description& groups,
                    const std::string& what);


// A given option's value as text (as config.ini would write it), "" when not given.
std::string given_text(const po::variables_map& vm, const std::string& key);

}  // namespace tri::cli
