// trilemma report DIR: a sweep folder's tables and plots. Reads DIR/results.jsonl (and
// sweep.json, runs/<id>/metrics.jsonl, scaling.jsonl when there), writes DIR/report.md,
// DIR/triangle.json (the trilemma's verdicts, when the folder has what they need) and DIR/plots/
// (<name>.png drawn by gnuplot from <name>.gp and <name>.dat) and prints the tables.
// Without gnuplot the report and the scripts are still written; one line says the plots were
// skipped. A missing folder or results.jsonl, or a malformed line, is one line and exit code 1.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "framework/core/tensor.hpp"
#include "framework/io/atomic_file.hpp"
#include "cli/cli.hpp"
#include "report/capacity.hpp"
#include "report/data.hpp"
#include "report/gnuplot.hpp"
#include "report/plots.hpp"
#include "report/tables.hpp"
#include "report/triangle.hpp"

namespace tri::cli {

using namespace tri::report;

namespace {

using namespace tri::report;

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

void report_options(CommandOptions& o) {
  o.named.add_options()("dir", po::value<std::string>()->value_name("DIR")->required(),
                        "the sweep folder (results.jsonl, sweep.json, runs/, scaling.jsonl), also the first "
                        "positional argument");
  o.positional.add("dir", 1);
}

int run_report(const po::variables_map& vm) {
  std::string dir = vm["dir"].as<std::string>();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const Sweep sweep = read_sweep(dir);
  const std::vector<Group> groups = group_runs(sweep);
  const std::vector<ScalingSeries> series = scaling_series(sweep);
  const std::vector<TriangleRow> triangle =
      has_triangle(sweep) ? triangle_rows(sweep, groups, series) : std::vector<TriangleRow>{};

  std::string tables;
  for (const std::vector<Table>& part : {accuracy_tables(sweep, groups), unfinished_table(sweep),
                                         capacity_tables(sweep, capacity_curves(sweep, groups)),
                                         scaling_tables(sweep, series), triangle_table(sweep, triangle)})
    for (const Table& t : part) tables += t.markdown();

  const std::vector<PlotSpec> plots = plan_plots(sweep, groups, series);
  const std::string gnuplot = find_gnuplot();
  const std::vector<std::string> failures =
      write_plots(plots, dir + "/plots", gnuplot, made_by(sweep));
  const bool drawn = !gnuplot.empty();
  write_text_atomically(dir + "/report.md", header_text(sweep) + tables + plots_text(sweep, plots, drawn));
  const std::string triangle_path = dir + "/triangle.json";
  if (!triangle.empty()) write_text_atomically(triangle_path, triangle_json(sweep, triangle).dump(2) + "\n");
  else std::filesystem::remove(triangle_path);  // a stale one would disagree with report.md

  std::printf("%s%s", header_text(sweep).c_str(), tables.c_str());
  for (const PlotSpec& p : plots)
    std::printf("plot %s/plots/%s.%s\n", dir.c_str(), p.name.c_str(), drawn ? "png" : "gp");
  if (!drawn && !plots.empty()) {
    const char* env = std::getenv("TRILEMMA_GNUPLOT");
    const std::string where = env && *env ? std::string("TRILEMMA_GNUPLOT=") + env + "; " : "";
    std::printf("plots skipped: gnuplot was not found (%sinstall gnuplot-nox); their scripts are in %s/plots/\n",
                where.c_str(), dir.c_str());
  }
  if (!triangle.empty()) std::printf("triangle %s\n", triangle_path.c_str());
  std::printf("report %s/report.md\n", dir.c_str());
  if (!failures.empty()) throw Error("report: plot " + failures.front());
  return 0;
}

}  // namespace tri::cli
