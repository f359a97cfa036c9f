// trilemma sweep GRID --out DIR: every run of a grid (sweep/runner.hpp).
#include "cli/arg_parsers.hpp"
#include "cli/cli.hpp"
#include "cli/cli_options.hpp"
#include "sweep/runner.hpp"

namespace tri::cli {

using namespace tri::train;

void sweep_options(CommandOptions& o) {
  o.named.add_options()
      ("grid", po::value<std::string>()->value_name("GRID"), "the grid file (key = value lines, lists of values, [sections])")
      ("out", po::value<std::string>()->value_name("DIR"), "the sweep folder (runs/, logs/, results.jsonl, results.csv)")
      ("jobs", po::value<int64_t>()->value_name("N")->default_value(1),
       "runs at once; each gets threads/N threads (jobs x threads never exceeds --threads)")
      ("shard", po::value<std::string>()->value_name("I/N")->default_value("1/1"),
       "run only the I-th of N slices of the grid (runs I, I+N, ...), e.g. a job array's task")
      ("set", po::value<std::vector<std::string>>()->value_name("KEY=VALUE")->composing(),
       "override an option in every run (repeatable; a list runs each value), e.g. --set steps=100, --set seed=0,1")
      ("results-only", po::bool_switch(), "rebuild results.jsonl and results.csv from the run folders; run nothing")
      ("dry-run", po::bool_switch(), "list the runs and their status; run nothing");
  o.positional.add("grid", 1);
}

int run_sweep(const po::variables_map& vm) {
  if (!vm.count("grid")) throw UsageError("missing the grid file (usage: trilemma sweep GRID --out DIR)");
  if (!vm.count("out")) throw UsageError("missing --out DIR (the sweep folder)");
  sweep::SweepRequest req;
  req.grid_path = vm["grid"].as<std::string>();
  req.dir = vm["out"].as<std::string>();
  req.shard = parse_shard(vm["shard"].as<std::string>());
  req.sets = parse_sets(vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{});
  RuntimeConfig runtime;
  read_given(vm, runtime);
  resolve_zeros(runtime);
  req.threads = runtime.threads;
  req.jobs = vm["jobs"].as<int64_t>();
  if (req.jobs < 1 || req.jobs > runtime.threads)
    throw UsageError("--jobs " + std::to_string(req.jobs) + " is out of range (allowed: 1.." +
                     std::to_string(runtime.threads) + ", at most --threads " + std::to_string(runtime.threads) +
                     ", so that jobs x threads never exceeds the cores)");
  req.dry_run = vm["dry-run"].as<bool>();
  req.results_only = vm["results-only"].as<bool>();
  return sweep::run_sweep(req);
}

}  // namespace tri::cli
