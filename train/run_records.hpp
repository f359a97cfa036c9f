// The records that cross layers as files: a run's summary.json (the trainer writes it, the sweep
// reads it) and a sweep's results row (results.jsonl and results.csv: the sweep writes them, the
// report reads them). They live here, below both sweep/ and report/, so that each has one writer
// and one reader and no other file spells their keys.
//
// The writers give today's bytes: keys in their order, numbers as nlohmann dumps them (NaN and
// infinities as null). The readers take every file written before: a field added since (skipped
// steps, the validation stream, state bytes per layer, lengths, ...) is empty when absent, and the
// summary's best_eval_acc is read as best_valid_acc, its name before the validation stream.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "train/run_config.hpp"

namespace tri::train {

// A task's extra metrics in the task's order (needle: acc@4, ...; mqar's mix: acc@K=4, ...; copy:
// gen_acc).
using ExtraValues = std::vector<std::pair<std::string, double>>;

// An evaluation's scores. Empty: a results row written by another tool may leave them out.
struct Scores {
  std::optional<double> token_acc, seq_acc, loss;
  ExtraValues extra;
  bool operator==(const Scores&) const = default;
};
struct StepScores : Scores {  // an evaluation at a training step
  std::optional<int64_t> step;
  bool operator==(const StepScores&) const = default;
};
struct LengthScores : Scores {  // the finished run evaluated at another length (--eval-lengths)
  int64_t seq_len = 0;
  bool operator==(const LengthScores&) const = default;
};

// summary.json: the outcome of a run, written whenever it stops.
struct RunSummary {
  std::string status;  // finished | early_stop | paused | interrupted | nonfinite
  int64_t step = 0, steps = 0, tokens_seen = 0;
  std::optional<double> final_train_loss;  // none: no step this invocation
  std::optional<int64_t> skipped_steps;    // non-finite loss or gradients (--on-nonfinite skip)
  // The reported accuracy: the held-out test stream, once the run is complete; the validation
  // stream's last evaluation, which chose when to stop and which checkpoint is best, beside it.
  std::optional<StepScores> final_eval, final_valid;
  std::optional<double> best_valid_acc;
  std::optional<int64_t> best_step;
  int64_t parameters = 0, state_bytes_per_sequence = 0;
  std::optional<std::vector<int64_t>> state_bytes_per_layer;
  std::string params_fnv1a;  // 16 hex digits
  double elapsed_s = 0;      // every invocation of the run
  std::optional<double> tokens_per_s, ms_per_step;  // ms_per_step: this invocation's median
  int64_t peak_memory_bytes = 0;
  std::optional<double> chance_token_acc;
  std::vector<LengthScores> lengths;
  Json config = Json::object();  // config_json of the run's config
  bool operator==(const RunSummary&) const = default;
};

// A summary missing one of the fields every summary has, or a field of the wrong type, is an
// Error naming the field.
void to_json(Json& j, const RunSummary& s);
void from_json(const Json& j, RunSummary& s);
std::string summary_text(const RunSummary& s);  // the file's text
// The summary at `path`; none when it is missing or unreadable (a run that never got that far,
// or a file that is no summary).
std::optional<RunSummary> read_summary(const std::string& path);

// A line of results.jsonl and a row of results.csv: one run of a sweep. Empty fields: a run with
// no summary yet (pending, failed), or a row written before the field.
struct ResultsRow {
  struct Best {  // the validation stream's best accuracy and its step
    std::optional<double> token_acc;
    std::optional<int64_t> step;
    bool operator==(const Best&) const = default;
  };
  std::string id, section, status;
  std::optional<std::string> error;  // a failed run's error, its first line
  std::string model, task;           // model: the family, or the hybrid or variant it is
  Json config = Json::object();      // the run's options without the execution ones
  std::vector<std::string> varying;  // the grid's varying keys
  std::optional<int64_t> parameters, state_bytes;  // state_bytes: per sequence
  std::optional<std::vector<int64_t>> state_bytes_per_layer;
  std::optional<int64_t> step, steps;
  std::optional<double> wall_s, tokens_per_s, ms_per_step;
  std::optional<int64_t> peak_memory_bytes;
  std::optional<double> chance;
  std::optional<StepScores> final_eval, final_valid;  // "final" (test stream), "valid"
  std::optional<Best> best;
  std::vector<LengthScores> lengths;
  bool operator==(const ResultsRow&) const = default;
};

// A row that is no object or has no id, or a field of the wrong type, is an Error naming it.
void to_json(Json& j, const ResultsRow& r);
void from_json(const Json& j, ResultsRow& r);
// results.csv's text: a column per config key, per extra metric and per evaluated length.
std::string results_csv(const std::vector<ResultsRow>& rows);

// Field readers of the JSON files: null or absent is empty; a value of another type is an Error
// naming the field. An integer may be written as a float with no fraction (512.0).
std::optional<double> json_number(const Json& j, const char* key);
std::optional<int64_t> json_int(const Json& j, const char* key);
std::string json_string(const Json& j, const char* key);  // "" when null or absent

}  // namespace tri::train
