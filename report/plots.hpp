// `trilemma report DIR`: the plots. Each is DIR/plots/<name>.png drawn by gnuplot (a child
// process) from <name>.gp and <name>.dat, which stay next to it so the plot can be redrawn
// (`cd DIR/plots && gnuplot <name>.gp`). Only the plots the data supports are made.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "report/data.hpp"

namespace tri::report {

struct Series {
  std::string title;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in this order
  std::string style = "linespoints lw 2";              // gnuplot's "with" clause
  std::vector<std::pair<double, double>> spread;  // (low, high) per point, for error bars; empty: none
};

struct PlotSpec {
  std::string name;  // file stem under DIR/plots/
  std::string title, xlabel, ylabel;
  bool log_x = false, log_y = false;
  std::string y_range;  // gnuplot's "[lo:hi]"; empty: automatic
  std::vector<Series> series;
  std::vector<std::string> extra_plots;  // further plot elements, e.g. a chance level line
  std::string caption;                   // for report.md, with the commands that made it
  std::string x_range;                   // gnuplot's "[lo:hi]"; empty: automatic
};

// The plots the sweep folder supports: accuracy vs sequence length, accuracy vs state bytes,
// loss curves, accuracy vs needle distance (per task), MQAR accuracy vs pairs and vs pairs per
// kB of state, time and memory vs T (per "what").
std::vector<PlotSpec> plan_plots(const Sweep& sweep, const std::vector<Group>& groups,
                                 const std::vector<ScalingSeries>& series);

// Writes <name>.gp and <name>.dat under plots_dir for every plot and, when gnuplot is given,
// draws <name>.png. Returns the names of the plots gnuplot failed to draw, each with the first
// line of its error.
std::vector<std::string> write_plots(const std::vector<PlotSpec>& plots, const std::string& plots_dir,
                                     const std::string& gnuplot, const std::string& made_by_line);

}  // namespace tri::report
