#include "report/gnuplot.hpp"

#include <cstdlib>
#include <fstream>

#include "framework/system/process.hpp"

namespace tri::report {

std::string find_gnuplot() {
  const char* env = std::getenv("TRILEMMA_GNUPLOT");
  return process::find_program(env && *env ? env : "gnuplot");
}

std::string gnuplot_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

std::string run_gnuplot(const std::string& gnuplot, const std::string& script, const std::string& log,
                        const std::string& dir) {
  process::Launch l;
  l.program = gnuplot;
  l.argv = {gnuplot, script};
  l.dir = dir;
  l.output = log;
  l.shell_signals = true;
  const process::Exit e = process::wait_for(process::launch(l).pid);
  if (e.ok()) return "";
  std::ifstream f(dir.empty() || log.front() == '/' ? log : dir + "/" + log);
  std::string first, line;
  while (first.empty() && std::getline(f, line))
    if (line.find_first_not_of(" \t^") != std::string::npos) first = line;
  return "gnuplot exited with " + std::to_string(e.code()) + (first.empty() ? "" : ": " + first);
}

}  // namespace tri::report
