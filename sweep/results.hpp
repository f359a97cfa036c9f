// A sweep folder's files and its results table.
//   DIR/runs/<id>/     each run's ordinary train folder (config.ini, metrics, summary.json, last.h5)
//   DIR/logs/<id>.log  the run's output, every attempt appended; <id>.error its last failure
//   DIR/results.jsonl  one JSON object per run of the grid, in grid order (every shard's runs
//   DIR/results.csv    that are on disk): config, size, outcome, evaluations, status
//   DIR/sweep.json     the grid, the command and the runs
#pragma once
#include <string>

#include "train/run_config.hpp"
#include "train/run_records.hpp"
#include "sweep/grid.hpp"

namespace tri::sweep {

std::string run_folder(const std::string& dir, const std::string& id);
std::string log_path(const std::string& dir, const std::string& id);
std::string error_path(const std::string& dir, const std::string& id);

// finished | early_stop (done), interrupted | paused (resumable from last.h5), failed (its
// error file is newer than any completion), pending (nothing on disk yet).
std::string run_status(const std::string& dir, const std::string& id);
bool is_done(const std::string& status);

// The run's row, from its grid entry and its summary.json (fields it has no value for are empty).
train::ResultsRow result_row(const SweepRun& run, const std::string& dir, const Grid& grid);

// Rewrites results.jsonl and results.csv from what is on disk, atomically.
void write_results(const std::string& dir, const Grid& grid);

}  // namespace tri::sweep
