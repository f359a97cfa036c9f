// Running a grid: each run an ordinary `trilemma train` process with its folder DIR/runs/<id>/,
// --jobs at a time, and the results table DIR/results.{jsonl,csv} rewritten as runs end.
// Re-running skips finished runs and resumes interrupted ones from their last.h5; a run that
// fails is recorded with its one-line error and the sweep goes on.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "framework/config/options.hpp"

namespace tri::sweep {

// --shard i/n: this process runs the grid's runs i-1, i-1+n, i-1+2n, ... (1-based i), so n
// machines (a Slurm job array) share one grid.
struct Shard {
  int64_t index = 1, count = 1;
  bool takes(size_t position) const { return int64_t(position % size_t(count)) == index - 1; }
};

struct SweepRequest {
  std::string grid_path, dir;
  Shard shard;
  TextMap sets;              // --set overrides
  int64_t jobs = 1;          // runs at once, 1..threads
  int64_t threads = 1;       // in all; each run gets threads / jobs
  bool dry_run = false;      // list the runs and their status
  bool results_only = false; // rebuild the results table from the run folders
};

// The exit code: 0, 1 when a run failed, or 128 + a stop signal (forwarded to the runs, which
// checkpoint and stop). A UsageError for a bad grid, before any run starts.
int run_sweep(const SweepRequest& req);

}  // namespace tri::sweep
