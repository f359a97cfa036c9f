// `trilemma report DIR`: the tables, as Markdown (report.md) that also reads on a terminal.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/data.hpp"

namespace tri::report {

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

// Text of numbers: "0.9500 ± 0.0100", "-" for nothing.
std::string mean_std_text(const Stat& s);
std::string format_number(std::optional<double> v, const char* format = "%.4f");

}  // namespace tri::report
