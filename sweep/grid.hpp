// A sweep's grid file: the `key = value` options of `trilemma train --config`, where a value may
// be a list of alternatives, expanded into the Cartesian product of runs.
//
//   # MQAR at two widths, three seeds        comments start with #
//   task = mqar                              lines before any [section] are shared by all
//   d-model = 32, 64                         a list: one run per value
//   (seq-len, num-kv-pairs) = (64, 4), (128, 8)   keys that vary together (zipped)
//   distance = 4 16 64                       a list-valued option: its items separated by spaces
//   [attention]                              a section: expanded on its own, then joined
//   model = attention
//   n-heads = 1
//
// A section's keys override the shared ones. Every run is resolved and validated when the grid
// is read, so a bad grid is one Error (naming the file, line or section and the value) before
// any run starts. A run's id is derived from its resolved config, so the same run keeps its
// folder when the grid is edited around it.
#pragma once
#include <string>
#include <vector>

#include "framework/config/options.hpp"
#include "train/run_config.hpp"

namespace tri::sweep {

struct SweepRun {
  std::string id;       // <model>-<task>-<12 hex digits of a hash of the resolved config>
  std::string section;  // the grid section it came from; "" when the grid has none
  train::RunConfig config;  // resolved and validated; run.out and run.run_name not yet set
};

struct Grid {
  std::vector<SweepRun> runs;         // in grid order: sections in file order, first key slowest
  std::vector<std::string> sections;  // in file order
  std::vector<std::string> varying;   // keys whose value differs between the runs
  int duplicates = 0;                 // entries that resolved to a run already listed
};

// The most runs a grid may expand to (before duplicates merge); a larger one is refused before
// any run is built.
constexpr size_t kMaxRuns = 10000;

// Reads and expands `path`. `overrides` (key = value or a list of values) replace the grid's
// values in every section: a shorter --steps for a test, or --set seed=0 for one seed of a grid
// (its runs keep their ids, so the whole grid later skips them).
Grid read_grid(const std::string& path, const TextMap& overrides = {});

// The fields that name where and how a run executes, not what it computes; they are left out
// of the id and may not appear in a grid (the sweep sets them).
bool is_execution_key(const std::string& key);

// The id of a resolved config: stable across grid edits, thread counts, output folders and
// fields added to the config later (while they hold their default).
std::string run_id(const train::RunConfig& config);

}  // namespace tri::sweep
