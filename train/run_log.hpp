// What a training run reports while it runs: metrics rows appended to the run folder's
// metrics.jsonl and metrics.csv, and progress on the terminal (a live bar) or as plain lines.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace tri::train {

// One row. Training rows fill every field; evaluation rows leave the training-only ones NaN
// (written as null in JSON, empty in CSV). Floats are written exactly (shortest round-trip).
struct MetricsRow {
  int64_t step = 0;
  std::string split;  // "train" or "valid"
  double loss = NAN, acc = NAN, seq_acc = NAN;
  double grad_norm = NAN, lr = NAN;
  double ms_per_step = NAN, tokens_per_s = NAN, elapsed_s = NAN;
  // Evaluation rows: the task's own metrics (needle's acc@d, mqar's acc@K=k), in metrics.jsonl
  // only (metrics.csv keeps its fixed columns).
  std::vector<std::pair<std::string, double>> extra;
};

class MetricsLog {
 public:
  // Appends to <dir>/metrics.jsonl and <dir>/metrics.csv. When resuming at `resume_step`
  // (>= 0), rows written after that step by the interrupted run are dropped first, so the
  // files read as if the run had never stopped.
  MetricsLog(const std::string& dir, int64_t resume_step);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void append(const MetricsRow& row);  // flushed at once

 private:
  std::string jsonl_path_, csv_path_;
  FILE* jsonl_ = nullptr;
  FILE* csv_ = nullptr;
};

// The step count a metrics line belongs to (its first field), -1 for a header or garbage.
int64_t metrics_line_step(const std::string& line);

class Progress {
 public:
  // mode: auto (a bar when stderr is a terminal, else lines), bar, lines, none.
  Progress(const std::string& mode, int64_t first_step, int64_t total_steps);
  ~Progress() { finish(); }
  // After each training step; `logged` says whether this step wrote a metrics row (lines mode
  // prints exactly those).
  void step(const MetricsRow& row, bool logged);
  // A line on stdout that does not tear the bar (evaluations, checkpoints).
  void message(const std::string& line);
  void finish();  // ends the bar's line

 private:
  enum class Mode { bar, lines, none } mode_;
  int64_t first_, total_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool drawn_ = false;
  std::string eta(int64_t step) const;
  void draw(const MetricsRow& row);
};

}  // namespace tri::train
