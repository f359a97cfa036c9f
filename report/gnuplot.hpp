// gnuplot, the program that draws every PNG: where it is, how a string goes into its scripts,
// and how a script runs. Without gnuplot the scripts and their data are still written.
#pragma once
#include <string>

namespace tri::report {

// TRILEMMA_GNUPLOT when set (a name looked up in PATH, or a path), else `gnuplot` on PATH; ""
// when there is none.
std::string find_gnuplot();

// A gnuplot double-quoted string literal.
std::string gnuplot_quoted(const std::string& s);

// Runs `gnuplot script` in `dir` (ours when empty), its output into `log` (relative to dir), with
// SIGINT and SIGTERM as a shell would give them. "" on success, else "gnuplot exited with N: "
// and the first line of what it printed.
std::string run_gnuplot(const std::string& gnuplot, const std::string& script, const std::string& log,
                        const std::string& dir = "");

}  // namespace tri::report
