// `trilemma report DIR`: the tables, as Markdown (report.md) that also reads on a terminal.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/report_data.hpp"

namespace tri::report {

// The trilemma's thresholds: a corner is held at these values.
constexpr double kReceptiveFieldAcc = 0.9;  // needle accuracy at the farthest distance
constexpr double kLinearCostExponent = 1.3;  // time per training step grows at most as T^1.3
constexpr double kPreciseMatchingAcc = 0.9;  // MQAR token accuracy
constexpr double kStateSeqLen = 4096;        // the T at which recurrent state bytes are compared

struct Table {
  std::string title;                         // the section heading
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string caption;                       // below the table: what it shows and the commands
  std::string markdown() const;              // heading, aligned pipe table, caption
};

// "Made by `<sweep command>` and `trilemma report DIR`." under every table and plot.
std::string made_by(const Sweep& sweep);

// Best learning rate per model and size; every learning rate; accuracy at other lengths and
// per needle distance (when the runs have them). Each with the task's chance level.
std::vector<Table> accuracy_tables(const Sweep& sweep, const std::vector<Group>& groups);
// The runs not averaged (failed, pending, paused, ...) with status and error; none when all completed.
std::vector<Table> unfinished_table(const Sweep& sweep);
// The fitted exponents of time and memory in T, per "what" and model (when there is scaling.jsonl).
std::vector<Table> scaling_tables(const Sweep& sweep, const std::vector<ScalingSeries>& series);

// The trilemma: one row per model family, when the folder has needle runs, mqar runs and
// scaling.jsonl; otherwise nothing.
struct TriangleRow {
  std::string model;
  std::optional<int64_t> needle_distance;
  std::optional<double> needle_acc, time_exponent, memory_exponent, state_bytes, mqar_acc;
  std::string state_note;  // how state_bytes was found ("measured", "extrapolated from ...")
  bool receptive_field() const { return needle_acc && *needle_acc >= kReceptiveFieldAcc; }
  bool linear_cost() const { return time_exponent && *time_exponent <= kLinearCostExponent; }
  bool precise_matching() const { return mqar_acc && *mqar_acc >= kPreciseMatchingAcc; }
  std::string corners() const;  // "receptive field + matching", or "none"
};
std::vector<TriangleRow> triangle_rows(const Sweep& sweep, const std::vector<Group>& groups,
                                       const std::vector<ScalingSeries>& series);
std::vector<Table> triangle_table(const Sweep& sweep, const std::vector<Group>& groups,
                                  const std::vector<ScalingSeries>& series);

// Text of numbers: "0.9500 ± 0.0100", "-" for nothing.
std::string mean_std_text(const Stat& s);
std::string number_text(std::optional<double> v, const char* format = "%.4f");

}  // namespace tri::report
