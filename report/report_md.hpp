// `trilemma report DIR` as one call: reads the sweep folder, writes DIR/report.md (the header, the
// tables and the plots' section), DIR/triangle.json (the trilemma's verdicts, when the folder has
// what they need; a stale one is removed, it would disagree with report.md) and DIR/plots/
// (<name>.png drawn by gnuplot from <name>.gp and <name>.dat). Without gnuplot the report and
// the scripts are still written.
#pragma once
#include <string>
#include <vector>

namespace tri::report {

// What write_report wrote, for its caller to tell.
struct ReportFiles {
  std::string text;                    // report.md's header and tables (without the plots' section)
  std::vector<std::string> plots;      // DIR/plots/<name>.png, or .gp when not drawn
  bool plots_drawn = false;            // gnuplot was found
  std::string triangle;                // DIR/triangle.json; "" when the folder has no triangle
  std::string report;                  // DIR/report.md
  std::vector<std::string> failures;   // plots gnuplot failed to draw, each with its error
};

// A missing folder or results.jsonl, or a malformed line, is a tri::Error naming it.
ReportFiles write_report(const std::string& dir);

}  // namespace tri::report
