// Every experiment's grid against its committed results: the runs the grid expands to are the
// runs results/<name>/results.jsonl records, by id. A run's id hashes its resolved config, so
// this fails when a default changes under a grid that relied on it (the grid must then state
// the old value), or when a grid and its committed results part ways.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "sweep/grid.hpp"

namespace fs = std::filesystem;

namespace {

std::set<std::string> committed_ids(const fs::path& results) {
  std::set<std::string> ids;
  std::ifstream in(results);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) ids.insert(nlohmann::json::parse(line).at("id").get<std::string>());
  return ids;
}

}  // namespace

TEST_CASE("every experiment's grid expands to the runs its committed results hold") {
  const fs::path root = TRILEMMA_SOURCE_DIR;
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(root / "experiments")) {
    if (entry.path().extension() != ".grid") continue;
    const std::string name = entry.path().stem().string();
    const fs::path results = root / "results" / name / "results.jsonl";
    CAPTURE(name);
    REQUIRE(fs::exists(results));  // every experiment has its committed results
    std::set<std::string> grid_ids;
    for (const tri::sweep::SweepRun& r : tri::sweep::read_grid(entry.path().string()).runs) grid_ids.insert(r.id);
    const std::set<std::string> ids = committed_ids(results);
    REQUIRE(!ids.empty());
    std::set<std::string> only_grid, only_results;
    for (const std::string& id : grid_ids)
      if (!ids.count(id)) only_grid.insert(id);
    for (const std::string& id : ids)
      if (!grid_ids.count(id)) only_results.insert(id);
    CAPTURE(only_grid.size());
    CAPTURE(only_results.size());
    CHECK(only_grid.empty());
    CHECK(only_results.empty());
    ++checked;
  }
  CHECK(checked >= 10);
}
