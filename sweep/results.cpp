#include "sweep/results.hpp"

#include <filesystem>
#include <fstream>

#include "framework/io/atomic_file.hpp"

namespace tri::sweep {

using namespace tri::train;

namespace fs = std::filesystem;

namespace {

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::string run_folder(const std::string& dir, const std::string& id) { return dir + "/runs/" + id; }
std::string log_path(const std::string& dir, const std::string& id) { return dir + "/logs/" + id + ".log"; }
std::string error_path(const std::string& dir, const std::string& id) { return dir + "/logs/" + id + ".error"; }

bool is_done(const std::string& status) { return status == "finished" || status == "early_stop"; }

namespace {

// The status given the run's summary (none when it has none).
std::string status_of(const std::string& dir, const std::string& id, const std::optional<RunSummary>& summary) {
  const std::string status = summary ? summary->status : "";
  if (is_done(status)) return status;
  if (fs::exists(error_path(dir, id))) return "failed";
  if (!status.empty()) return status;
  return fs::exists(run_folder(dir, id) + "/last.h5") ? "interrupted" : "pending";
}

}  // namespace

std::string run_status(const std::string& dir, const std::string& id) {
  return status_of(dir, id, read_summary(run_folder(dir, id) + "/summary.json"));
}

ResultsRow result_row(const SweepRun& run, const std::string& dir, const Grid& grid) {
  const std::optional<RunSummary> s = read_summary(run_folder(dir, run.id) + "/summary.json");
  ResultsRow row;
  row.id = run.id;
  row.section = run.section;
  row.status = status_of(dir, run.id, s);
  if (row.status == "failed") row.error = first_line(error_path(dir, run.id));
  row.model = run.config.model.variant();  // the family, or the hybrid or variant it is
  row.task = run.config.task.task;
  row.config = config_json(run.config);
  for (auto it = row.config.begin(); it != row.config.end();)
    it = is_execution_key(it.key()) ? row.config.erase(it) : std::next(it);
  row.varying = grid.varying;
  row.steps = run.config.run.steps;
  row.chance = run.config.task.behaviour().chance_accuracy(run.config.task);
  if (s) {
    row.parameters = s->parameters;
    row.state_bytes = s->state_bytes_per_sequence;
    row.state_bytes_per_layer = s->state_bytes_per_layer;
    row.step = s->step;
    row.wall_s = s->elapsed_s;
    row.tokens_per_s = s->tokens_per_s;
    row.ms_per_step = s->ms_per_step;
    row.peak_memory_bytes = s->peak_memory_bytes;
    row.final_eval = s->final_eval;
    row.final_valid = s->final_valid;
    if (s->best_step) row.best = ResultsRow::Best{s->best_valid_acc, s->best_step};
    row.lengths = s->lengths;
  }
  return row;
}

void write_results(const std::string& dir, const Grid& grid) {
  std::vector<ResultsRow> rows;
  std::string jsonl;
  for (const SweepRun& r : grid.runs) {
    rows.push_back(result_row(r, dir, grid));
    jsonl += Json(rows.back()).dump() + "\n";
  }
  write_text_atomically(dir + "/results.jsonl", jsonl);
  write_text_atomically(dir + "/results.csv", results_csv(rows));
}

}  // namespace tri::sweep
