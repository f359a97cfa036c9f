// trilemma report DIR: a sweep folder's tables and plots (report::write_report writes report.md,
// triangle.json and plots/), then the tables and the files written are printed. Without gnuplot
// one line says the plots were skipped. A missing folder or results.jsonl, or a malformed line,
// is one line and exit code 1.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "framework/base/error.hpp"
#include "cli/cli.hpp"
#include "report/report_md.hpp"

namespace tri::cli {

void report_options(CommandOptions& o) {
  o.named.add_options()("dir", po::value<std::string>()->value_name("DIR")->required(),
                        "the sweep folder (results.jsonl, sweep.json, runs/, scaling.jsonl), also the first "
                        "positional argument");
  o.positional.add("dir", 1);
}

int run_report(const po::variables_map& vm) {
  std::string dir = vm["dir"].as<std::string>();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const report::ReportFiles out = report::write_report(dir);
  std::printf("%s", out.text.c_str());
  for (const std::string& p : out.plots) std::printf("plot %s\n", p.c_str());
  if (!out.plots_drawn && !out.plots.empty()) {
    const char* env = std::getenv("TRILEMMA_GNUPLOT");
    const std::string where = env && *env ? std::string("TRILEMMA_GNUPLOT=") + env + "; " : "";
    std::printf("plots skipped: gnuplot was not found (%sinstall gnuplot-nox); their scripts are in %s/plots/\n",
                where.c_str(), dir.c_str());
  }
  if (!out.triangle.empty()) std::printf("triangle %s\n", out.triangle.c_str());
  std::printf("report %s\n", out.report.c_str());
  if (!out.failures.empty()) throw Error("report: plot " + out.failures.front());
  return 0;
}

}  // namespace tri::cli
