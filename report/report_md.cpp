#include "report/report_md.hpp"

#include <filesystem>

#include "framework/io/atomic_file.hpp"
#include "report/capacity.hpp"
#include "report/data.hpp"
#include "report/gnuplot.hpp"
#include "report/plots.hpp"
#include "report/tables.hpp"
#include "report/triangle.hpp"

namespace tri::report {

namespace {

std::string header_text(const Sweep& sweep) {
  int averaged = 0;
  for (const RunRow& r : sweep.runs) averaged += r.completed();
  std::string grouped = "task, model";
  for (const std::string& k : group_keys(sweep)) grouped += ", " + k;
  return "# Sweep report\n\nFolder `" + sweep.dir + "`. Sweep: `" + sweep.sweep_command + "`. Report: `" +
         sweep.report_command + "`.\n\n" + std::to_string(sweep.runs.size()) + " runs in results.jsonl, " +
         std::to_string(averaged) + " averaged (finished or stopped early), " +
         std::to_string(sweep.runs.size() - averaged) +
         " not. Runs are grouped by " + grouped +
         "; each group's seeds give the mean ± std, and its learning rates the best one.\n\n";
}

std::string plots_text(const Sweep& sweep, const std::vector<PlotSpec>& plots, bool drawn) {
  if (plots.empty()) return "";
  std::string s = "## Plots\n\n";
  if (!drawn) s += "Not drawn: gnuplot was not found (install gnuplot-nox). Each plot's script and data are in plots/; "
                   "`cd plots && gnuplot NAME.gp` draws it.\n\n";
  for (const PlotSpec& p : plots) {
    s += "### " + p.title + "\n\n";
    if (drawn) s += "![" + p.title + "](plots/" + p.name + ".png)\n\n";
    s += p.caption + " " + made_by(sweep) + " Data and script: `plots/" + p.name + ".dat`, `plots/" + p.name +
         ".gp`.\n\n";
  }
  return s;
}

}  // namespace

ReportFiles write_report(const std::string& dir) {
  const Sweep sweep = read_sweep(dir);
  const std::vector<Group> groups = group_runs(sweep);
  const std::vector<ScalingSeries> series = scaling_series(sweep);
  const std::vector<TriangleRow> triangle =
      has_triangle(sweep) ? triangle_rows(sweep, groups, series) : std::vector<TriangleRow>{};

  ReportFiles out;
  out.text = header_text(sweep);
  for (const std::vector<Table>& part : {accuracy_tables(sweep, groups), unfinished_table(sweep),
                                         capacity_tables(sweep, capacity_curves(sweep, groups)),
                                         scaling_tables(sweep, series), triangle_table(sweep, triangle)})
    for (const Table& t : part) out.text += t.markdown();

  const std::vector<PlotSpec> plots = plan_plots(sweep, groups, series);
  const std::string gnuplot = find_gnuplot();
  out.failures = write_plots(plots, dir + "/plots", gnuplot, made_by(sweep));
  out.plots_drawn = !gnuplot.empty();
  for (const PlotSpec& p : plots) out.plots.push_back(dir + "/plots/" + p.name + (out.plots_drawn ? ".png" : ".gp"));
  out.report = dir + "/report.md";
  write_text_atomically(out.report, out.text + plots_text(sweep, plots, out.plots_drawn));
  const std::string triangle_path = dir + "/triangle.json";
  if (!triangle.empty()) {
    write_text_atomically(triangle_path, triangle_json(sweep, triangle).dump(2) + "\n");
    out.triangle = triangle_path;
  } else {
    std::filesystem::remove(triangle_path);  // a stale one would disagree with report.md
  }
  return out;
}

}  // namespace tri::report
