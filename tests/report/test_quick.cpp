// The main job's experiment (experiments/quick.grid) at reduced steps and sizes: the sweep runs
// its 21 runs (three seeds), the scaling benchmark measures the three families and the windowed
// attention, and the report prints the triangle table with a row per variant and every column,
// and writes triangle.json. The numbers are not checked (12 steps learn nothing); that the
// pipeline delivers the table is, that 12 steps read "did not learn" rather than "no" (and no
// capacity rather than a capacity of 0), and that the window reads a structural no whatever its
// runs learned.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "tests/report_md.hpp"
#include "tests/run_binary.hpp"

using namespace trilemma_test;

TEST_CASE("quick at reduced steps prints the triangle table with every row and column") {
  const fs::path dir = scratch("quick");
  const std::string grid = std::string(TRILEMMA_SOURCE_DIR) + "/experiments/quick.grid";
  Run r = run("sweep '" + grid + "' --out '" + dir.string() +
              "' --threads 1 --set steps=12 --set warmup=2 --set eval-every=6 --set eval-batches=1");
  INFO(r.out, r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("21 runs in 2 section(s)") != std::string::npos);
  r = run("bench scaling --threads 1 --seq-lens 32,64,128 --batch 1 --d-model 16 --n-layers 1 --repeats 1"
          " --decode-tokens 2 --window 16 --out '" + (dir / "scaling.jsonl").string() + "'");
  REQUIRE(r.code == 0);
  r = run("report '" + dir.string() + "'", "TRILEMMA_GNUPLOT=/nonexistent");
  INFO(r.out);
  REQUIRE(r.code == 0);

  const auto triangle = markdown_table(r.out, "The trilemma");
  REQUIRE(triangle.size() == 1 + 4);
  const std::vector<std::string>& header = triangle[0];
  for (const char* column :
       {"variant", "needle d", "needle acc per seed", "needle n", "needle 95% interval", "receptive field",
        "time exponent", "time exponent 95% interval", "memory exponent", "linear cost", "state bytes at T=4096",
        "MQAR K", "MQAR acc per seed", "MQAR n", "MQAR 95% interval", "matching", "capacity per seed",
        "capacity (pairs)", "pairs per kB", "book's matching", "corners held"}) {
    CAPTURE(column);
    CHECK(std::find(header.begin(), header.end(), column) != header.end());
  }
  for (const char* variant : {"attention", "attention window=16", "linear", "mamba"}) {
    CAPTURE(variant);
    auto row = row_of(triangle, {variant});
    REQUIRE(row.size() == header.size());
    CHECK(row["needle d"] == "126");  // the farthest needle of the grid
    CHECK(row["needle acc per seed"] != "-");
    // 12 steps learn no needle: did not learn, never a no. The window's no is structural, and it
    // is trained on the needle only: its matching is not measured.
    if (std::string(variant) == "attention window=16") {
      CHECK(row["receptive field"].rfind("no (structural", 0) == 0);
      CHECK(row["MQAR K"] == "-");
      CHECK(row["matching"] == "not measured");
      CHECK(row["capacity (pairs)"] == "-");
      CHECK(row["book's matching"] == "-");
    } else {
      CHECK(row["receptive field"].rfind("did not learn", 0) == 0);
      CHECK(row["MQAR K"] == "16");  // read at the largest K of the mix
      CHECK(row["MQAR acc per seed"].find(", ") != std::string::npos);  // three seeds
      CHECK(row["matching"].rfind("did not learn", 0) == 0);
      CHECK(row["capacity (pairs)"].rfind("did not learn", 0) == 0);
      CHECK(row["book's matching"] != "-");
    }
  }
  CHECK(read_text(dir / "report.md").find("corners held") != std::string::npos);
  const std::string json = read_text(dir / "triangle.json");
  for (const char* variant : {"attention", "attention window=16", "linear", "mamba"})
    CHECK(json.find(std::string("\"label\": \"") + variant + "\"") != std::string::npos);
}
