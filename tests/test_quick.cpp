// The main job's experiment (experiments/quick.grid) at reduced steps and sizes: the sweep runs
// its six runs, the scaling benchmark measures the three families, and the report prints the
// triangle table with a row per family and every column. The numbers are not checked (20 steps
// learn nothing); that the pipeline delivers the table is.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>

#include "tests/run_binary.hpp"

using namespace trilemma_test;

namespace {

std::string line_with(const std::string& text, const std::string& start) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(start, 0) == 0) return line;
  return "";
}

}  // namespace

TEST_CASE("quick at reduced steps prints the triangle table with every row and column") {
  const fs::path dir = scratch("quick");
  const std::string grid = std::string(TRILEMMA_SOURCE_DIR) + "/experiments/quick.grid";
  Run r = run("sweep '" + grid + "' --out '" + dir.string() +
              "' --threads 1 --set steps=12 --set warmup=2 --set eval-every=6 --set eval-batches=1");
  INFO(r.out, r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("6 runs in 2 section(s)") != std::string::npos);
  r = run("bench scaling --threads 1 --seq-lens 32,64,128 --batch 1 --d-model 16 --n-layers 1 --repeats 1"
          " --decode-tokens 2 --out '" + (dir / "scaling.jsonl").string() + "'");
  REQUIRE(r.code == 0);
  r = run("report '" + dir.string() + "'", "TRILEMMA_GNUPLOT=/nonexistent");
  INFO(r.out);
  REQUIRE(r.code == 0);

  REQUIRE(r.out.find("## The trilemma") != std::string::npos);
  const std::string triangle = r.out.substr(r.out.find("## The trilemma"));
  const std::string header = line_with(triangle, "| model ");
  for (const char* column : {"needle d", "needle acc", "receptive field", "time exponent", "memory exponent",
                             "linear cost", "state bytes at T=4096", "MQAR acc", "matching", "corners held"}) {
    CAPTURE(column);
    CHECK(header.find(column) != std::string::npos);
  }
  const size_t columns = std::count(header.begin(), header.end(), '|');
  for (const char* family : {"attention", "linear", "mamba"}) {
    CAPTURE(family);
    const std::string row = line_with(triangle, std::string("| ") + family + " ");
    REQUIRE(!row.empty());
    CHECK(size_t(std::count(row.begin(), row.end(), '|')) == columns);
    CHECK(row.find("| 250 ") != std::string::npos);  // the farthest needle of the grid
  }
  CHECK(read_text(dir / "report.md").find("corners held") != std::string::npos);
}
