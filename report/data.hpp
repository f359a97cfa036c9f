// `trilemma report DIR`: the sweep folder as data (results.jsonl, sweep.json, scaling.jsonl,
// runs/<id>/metrics.jsonl, in the layout `trilemma sweep` writes), grouped as the papers report
// it: mean and standard deviation over seeds, the best learning rate per model and size.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tri::report {

using Json = nlohmann::ordered_json;

// The report's view of a row of results.jsonl (read as a train::ResultsRow): what it groups and
// averages. Unknown fields (a pending or failed run) are empty optionals.
struct RunRow {
  int line = 0;  // in results.jsonl, for messages
  std::string id, section, status, error, model, task;
  Json config = Json::object();
  std::optional<double> parameters, state_bytes, chance, token_acc, seq_acc, loss;  // token_acc...: the test stream
  std::optional<double> valid_acc;  // the last validation evaluation's token accuracy
  std::optional<int64_t> step, steps;
  std::map<int64_t, double> acc_at;              // final.extra's acc@d, by distance d
  std::map<int64_t, double> acc_at_pairs;  // mqar: the test accuracy by pairs K (a mix's acc@K=k; one K: token_acc)
  std::vector<std::pair<int64_t, double>> lengths;  // (seq_len, token_acc) of the eval at other lengths

  // Finished (or stopped early at its target) with a final accuracy: averaged. Every other run
  // (failed, pending, paused, interrupted) is listed, never averaged.
  bool completed() const;
  std::optional<double> acc_at_distance(int64_t d) const;  // acc@d, when the run has it
  // What a best learning rate or size is chosen on: the validation stream's accuracy, never the
  // test stream's it then reports (rows written before the validation stream: the final one).
  std::optional<double> choice_acc() const { return valid_acc ? valid_acc : token_acc; }
  // The value of a grouping key: the config's field, else the row's own ("model", "task",
  // "section"); null when neither has it.
  Json value(const std::string& key) const;
};

// A run's attention window: the config's "window" when a positive integer, else 0 (full attention).
int64_t window_of(const RunRow& r);
// An architecture variant's name: the model, plus its window when it has one ("attention window=32").
std::string variant_label(const std::string& model, int64_t window);

// One measurement of scaling.jsonl (`trilemma bench scaling`).
struct ScalingRow {
  std::string model, what;  // what: model | mixer | decode
  int64_t seq_len = 0, batch = 0, d_model = 0, n_layers = 0;
  int64_t window = 0;  // attention's window (0: full attention)
  double ms = 0;
  std::optional<double> peak_bytes, state_bytes;
  std::vector<double> layer_state_bytes;  // per layer (rows written before it: empty)
};

struct Sweep {
  std::string dir;
  std::string sweep_command;   // sweep.json's "command"; a note when sweep.json is missing
  std::string report_command;  // "trilemma report DIR"
  std::vector<RunRow> runs;    // in grid order
  std::vector<std::string> varying;  // the grid's varying keys (the rows' own, else computed)
  bool has_scaling = false;
  std::vector<ScalingRow> scaling;
};

// Reads DIR; a missing DIR or results.jsonl, or a malformed line of a JSON file, is a tri::Error
// naming the file and line.
Sweep read_sweep(const std::string& dir);

// Mean and sample standard deviation (n - 1; 0 for a single value).
struct Stat {
  int n = 0;
  double mean = 0, std = 0;
};
Stat stat_of(const std::vector<double>& values);

// The runs of one learning rate within a group (one per seed).
struct LrCell {
  Json lr;
  std::vector<const RunRow*> runs;
  Stat token_acc, seq_acc, loss, choice_acc;
  // Mean over the cell's runs of a value some runs may lack (those are left out).
  Stat stat(const std::function<std::optional<double>(const RunRow&)>& get) const;
  const RunRow& lowest_seed() const;
};

// Completed runs with the same task, model and varying keys except seed and lr.
struct Group {
  std::string task, model;
  std::vector<std::pair<std::string, Json>> keys;  // the other varying keys, in the grid's order
  std::vector<LrCell> cells;                      // one per learning rate, in grid order
  size_t best = 0;                                // the cell with the highest mean token_acc

  const LrCell& best_cell() const { return cells[best]; }
  // "attention d-model=64": the model and the keys, leaving out the named ones.
  std::string label(const std::vector<std::string>& leave_out = {}) const;
  std::optional<double> number(const std::string& key) const;  // a key's value, when a number
};

// The varying keys groups are told apart by (the varying ones but seed, lr, model and task).
std::vector<std::string> group_keys(const Sweep& sweep);
// Groups in order of first appearance; empty when no run completed.
std::vector<Group> group_runs(const Sweep& sweep);

// A JSON value as table text: numbers in %g, strings bare, lists as JSON.
std::string value_text(const Json& v);

// y = c * T^exponent, fitted by least squares of log y on log T over the largest T: the upper
// half of the points, at least kMinFitPoints (all of them when there are fewer).
constexpr size_t kMinFitPoints = 3;
struct PowerFit {
  bool ok = false;  // at least two distinct T
  double exponent = 0, log_coef = 0;
  double exponent_se = 0;  // standard error of the slope; meaningful when dof() > 0
  double t_lo = 0, t_hi = 0;  // the fitted range
  int points = 0;
  double at(double t) const;  // c * t^exponent
  std::string range_text() const;  // "T = 1024..4096 (3 points)"
  int dof() const { return points - 2; }  // the residuals' degrees of freedom
};
PowerFit fit_power_law(std::vector<std::pair<double, double>> points);

// The measurements of one model under one "what" (and shape: batch, d_model, n_layers), by T,
// with the fitted exponents of time and of peak memory.
struct ScalingSeries {
  std::string what, model, label;  // label: the model (and window), plus the shape when a "what" has several
  int64_t window = 0;
  std::vector<std::pair<double, double>> ms, peak_bytes, state_bytes;  // (seq_len, value)
  std::map<double, std::vector<double>> layer_state_bytes;             // by seq_len
  PowerFit time_fit, memory_fit;
};
std::vector<ScalingSeries> scaling_series(const Sweep& sweep);

// The train loss curve of a run folder's metrics.jsonl: (step, loss) of the "train" rows.
// Empty when the file is missing; a malformed line is a tri::Error naming the file and line.
std::vector<std::pair<double, double>> read_loss_curve(const std::string& metrics_path);

// Reads a JSON-lines file: fn(row, line number) per non-blank line; a malformed line (or an
// exception fn throws) becomes a tri::Error "FILE:LINE: ...".
void read_json_lines(const std::string& path, const std::function<void(const Json&, int)>& fn);

}  // namespace tri::report
